-- bench/webhook-ingest/ingest.lua - wrk script: POST pre-signed issues.labeled deliveries.
--
-- Each request takes the next body of the pool (make_pool.py) with its signature and a fresh
-- X-GitHub-Delivery id (UUID-shaped: run id, thread, counter). With BENCH_RATE > 0 the
-- requests are paced to that many per second overall: every wrk thread hands out send slots
-- BENCH_THREADS/BENCH_RATE seconds apart (wrk calls delay() before each request of a
-- connection), an open schedule that does not speed up to catch up after slow answers.
-- done() prints one RESULT line and one STATUS line for the run script.
-- Environment: BENCH_POOL (path), BENCH_PATH, BENCH_RATE, BENCH_THREADS, BENCH_RUN_ID.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk, bench_timespec *ts);
]]

local pool = dofile(os.getenv("BENCH_POOL"))
local path = os.getenv("BENCH_PATH") or "/api/github/webhooks"
local rate = tonumber(os.getenv("BENCH_RATE") or "0")
local nthreads = tonumber(os.getenv("BENCH_THREADS") or "2")
local run_id = tonumber(os.getenv("BENCH_RUN_ID") or "0")

local threads = {}
tid = 0 -- set per thread by setup()
counter = 0
statuses = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function request()
  counter = counter + 1
  local e = pool[((counter * nthreads + tid) % #pool) + 1]
  local headers = {
    ["Content-Type"] = "application/json",
    ["User-Agent"] = "GitHub-Hookshot/bench",
    ["X-GitHub-Event"] = "issues",
    ["X-GitHub-Delivery"] = string.format("%08x-%04x-4000-8000-%012x", run_id, tid, counter),
    ["X-Hub-Signature-256"] = e[2],
  }
  return wrk.format("POST", path, headers, e[1])
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

if rate > 0 then
  local ts = ffi.new("bench_timespec")
  local interval = 1000.0 * nthreads / rate
  local next_slot = nil

  local function now_ms()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1000.0 + tonumber(ts.tv_nsec) / 1e6
  end

  function delay()
    local now = now_ms()
    local slot = next_slot and math.max(next_slot, now) or now
    next_slot = slot + interval
    return math.floor(slot - now + 0.5)
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d connect=%d read=%d write=%d status=%d timeout=%d " ..
    "p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
  local total = {}
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("statuses") or {}) do
      total[code] = (total[code] or 0) + n
    end
  end
  local parts = {}
  for code, n in pairs(total) do
    table.insert(parts, string.format("%d=%d", code, n))
  end
  table.sort(parts)
  io.write("STATUS " .. table.concat(parts, " ") .. "\n")
end
