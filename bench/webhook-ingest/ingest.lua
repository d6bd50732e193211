-- bench/webhook-ingest/ingest.lua - wrk script: POST pre-signed issues.labeled deliveries.
--
-- Each request takes the next body of the pool (make_pool.py) with its signature and a fresh
-- X-GitHub-Delivery id (UUID-shaped: run id, thread, counter). With BENCH_RATE > 0 the
-- requests are paced to that many per second overall: every wrk thread hands out send slots
-- BENCH_THREADS/BENCH_RATE seconds apart (wrk calls delay() before each request of a
-- connection), an open schedule that does not speed up to catch up after slow answers.
-- With BENCH_UNIQUE=1 every request instead carries its own issue number (so every delivery
-- is a new trigger, never a duplicate of an active job) and is signed here with libcrypto's
-- HMAC through LuaJIT's FFI. The number is at the end of the body (make_pool.py), so each
-- signature resumes from an HMAC state over the constant prefix, made once; and the request
-- is one concatenation (one 12 KB string, not a body and then a request built from it).
-- done() prints one RESULT line and one STATUS line for the run script.
-- Environment: BENCH_POOL (path), BENCH_PATH, BENCH_RATE, BENCH_THREADS, BENCH_RUN_ID,
-- BENCH_RUN_SEQ (small run number, part of unique issue numbers), BENCH_UNIQUE, BENCH_SECRET.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk, bench_timespec *ts);
]]

local data = dofile(os.getenv("BENCH_POOL"))
local pool = data.pool
local path = os.getenv("BENCH_PATH") or "/api/github/webhooks"
local rate = tonumber(os.getenv("BENCH_RATE") or "0")
local nthreads = tonumber(os.getenv("BENCH_THREADS") or "1")
local run_id = tonumber(os.getenv("BENCH_RUN_ID") or "0")
local run_seq = tonumber(os.getenv("BENCH_RUN_SEQ") or "1")
local unique = os.getenv("BENCH_UNIQUE") == "1"
local sign -- the body's tail after data.prefix → "sha256=<hex>" of the whole body (unique mode)

if unique then
  ffi.cdef [[
  typedef struct evp_md_st EVP_MD;
  const EVP_MD *EVP_sha256(void);
  typedef struct hmac_ctx_st HMAC_CTX;
  HMAC_CTX *HMAC_CTX_new(void);
  int HMAC_Init_ex(HMAC_CTX *ctx, const void *key, int len, const EVP_MD *md, void *impl);
  int HMAC_Update(HMAC_CTX *ctx, const unsigned char *data, size_t len);
  int HMAC_Final(HMAC_CTX *ctx, unsigned char *md, unsigned int *len);
  int HMAC_CTX_copy(HMAC_CTX *dctx, HMAC_CTX *sctx);
  ]]
  local ok, crypto = pcall(ffi.load, "crypto")
  if not ok then crypto = ffi.load("libcrypto.so.3") end
  local secret = os.getenv("BENCH_SECRET")
  local md = ffi.new("unsigned char[32]")
  local md_len = ffi.new("unsigned int[1]")
  local base, work = crypto.HMAC_CTX_new(), crypto.HMAC_CTX_new()
  assert(base ~= nil and work ~= nil, "HMAC_CTX_new failed")
  assert(crypto.HMAC_Init_ex(base, secret, #secret, crypto.EVP_sha256(), nil) == 1)
  assert(crypto.HMAC_Update(base, data.prefix, #data.prefix) == 1)
  local hex = {}
  for i = 0, 255 do hex[i] = string.format("%02x", i) end
  local parts = {}
  sign = function(tail)
    assert(crypto.HMAC_CTX_copy(work, base) == 1)
    crypto.HMAC_Update(work, tail, #tail)
    crypto.HMAC_Final(work, md, md_len)
    for i = 0, 31 do parts[i + 1] = hex[md[i]] end
    return "sha256=" .. table.concat(parts)
  end
end

local threads = {}
tid = 0 -- set per thread by setup()
counter = 0
statuses = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

local head -- unique mode: the request line and the headers that never change, made once

function request()
  counter = counter + 1
  local body, sig
  local id = string.format("%08x-%04x-4000-8000-%012x", run_id, tid, counter)
  if unique then
    if not head then
      -- wrk.format ends the header block with an empty line (no body: no Content-Length)
      head = wrk.format("POST", path, {
        ["Content-Type"] = "application/json",
        ["User-Agent"] = "GitHub-Hookshot/bench",
        ["X-GitHub-Event"] = "issues",
      }):sub(1, -3)
    end
    local tail = tostring(run_seq * 100000000 + tid * 10000000 + counter) .. data.suffix
    return head .. "X-GitHub-Delivery: " .. id .. "\r\nX-Hub-Signature-256: " .. sign(tail) ..
      "\r\nContent-Length: " .. (#data.prefix + #tail) .. "\r\n\r\n" .. data.prefix .. tail
  else
    local e = pool[((counter * nthreads + tid) % #pool) + 1]
    body, sig = e[1], e[2]
  end
  local headers = {
    ["Content-Type"] = "application/json",
    ["User-Agent"] = "GitHub-Hookshot/bench",
    ["X-GitHub-Event"] = "issues",
    ["X-GitHub-Delivery"] = id,
    ["X-Hub-Signature-256"] = sig,
  }
  return wrk.format("POST", path, headers, body)
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
