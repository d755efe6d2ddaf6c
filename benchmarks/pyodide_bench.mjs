// Pyodide under Node, for benchmarks/bench_sandbox.py: prints one JSON line.
// Run from a directory where `npm install pyodide` was done.
import { loadPyodide } from "pyodide";

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const now = () => Number(process.hrtime.bigint()) / 1e6; // ms

const rss0 = process.memoryUsage().rss;
let t = now();
const py = await loadPyodide();
const loadMs = now() - t;
const rssLoaded = process.memoryUsage().rss;

t = now(); py.runPython("1"); const firstMs = now() - t;
const warm = [];
for (let i = 0; i < 2000; i++) { t = now(); py.runPython("1"); warm.push(now() - t); }

py.globals.set("noop", () => null);
const N = 2000;
py.runPython(`def loop(n):\n    for _ in range(n):\n        noop()\ndef empty(n):\n    for _ in range(n):\n        pass`);
const loop = py.globals.get("loop"), empty = py.globals.get("empty");
loop(100);
t = now(); loop(N); const withCalls = now() - t;
t = now(); empty(N); const without = now() - t;

// CPU-bound workloads (from bench_sandbox.py): setup, then time the workload alone.
const cpu = {};
const workloads = JSON.parse(process.env.BENCH_WORKLOADS || "{}");
const repeat = Number(process.env.BENCH_REPEAT || 3);
for (const [name, [setup, timed]] of Object.entries(workloads)) {
  py.runPython(setup || "0");
  const samples = [];
  for (let i = 0; i < repeat; i++) { t = now(); py.runPython(timed); samples.push(now() - t); }
  cpu[`${name}_ms`] = median(samples);
}

console.log(JSON.stringify({
  ...cpu,
  load_ms: loadMs, first_ms: firstMs, warm_ms: median(warm),
  call_us: ((withCalls - without) / N) * 1000,
  rss_mb: rssLoaded / 1048576, rss_delta_mb: (rssLoaded - rss0) / 1048576,
  node: process.version,
}));
