-- A gopher server in Lua 5.4, the ground truth of reqcost's Lua frames (docs/interpreters.md).
-- Run by Debian's lua5.4 (`lua5.4 server.lua PORT`) or embedded through liblua5.4 by host.c
-- (`build/lua-host server.lua PORT`). One connection at a time, each served by a coroutine
-- that yields mid-request (after reading the selector, and again inside the pcall'd handler),
-- as the seeds' Lua servers serve theirs. Selectors:
--   wrap      wrap_text: 5 * WORK iterations of the loop below
--   links     translate_links: WORK iterations of the same loop (1/5 of wrap's CPU)
--   deep      recursion DEPTH calls deep, then wrap_text with WORK / 5
--   fail      WORK / 5 iterations, then an error unwinding through the handler's pcall
-- Anything else gets an error line. The loops call no C function, so their CPU is the VM's.
local socket = require("socket")

local WORK = 400000
local DEPTH = 100

-- Global on purpose: its caller names it through _ENV (a global), translate_links through an
-- upvalue (a local function).
function wrap_text(n)
  local x = 0
  for i = 1, 5 * n do
    x = (x * 31 + i) % 1000003
  end
  return x
end

local function translate_links(n)
  local x = 0
  for i = 1, n do
    x = (x * 31 + i) % 1000003
  end
  return x
end

local function deep(depth, n)
  if depth == 0 then
    local r = wrap_text(n)
    return r
  end
  local r = deep(depth - 1, n)
  return r
end

local function failing(n)
  local x = translate_links(n)
  error("failing after " .. x)
end

-- No tail calls (`return f(x)`): a tail-called function has no caller to be named by.
local handlers = {
  wrap = function()
    local r = wrap_text(WORK)
    return r
  end,
  links = function()
    local r = translate_links(WORK)
    return r
  end,
  deep = function()
    local r = deep(DEPTH, WORK // 25)
    return r
  end,
  fail = function()
    local r = failing(WORK // 5)
    return r
  end,
}

local function handle(selector)
  local h = handlers[selector]
  if not h then
    error("no such selector")
  end
  coroutine.yield()
  local r = h()
  return r
end

local function serve(client)
  local selector = client:receive("*l")
  coroutine.yield()
  local ok, result = pcall(handle, selector and selector:gsub("\r$", "") or "")
  if ok then
    client:send("i" .. tostring(result) .. "\t\t\t\r\n.\r\n")
  else
    client:send("3" .. tostring(result) .. "\t\t\t\r\n.\r\n")
  end
end

local port = assert(tonumber(arg[1]), "usage: server.lua PORT")
local listener = assert(socket.bind("127.0.0.1", port))
io.stderr:write("listening on 127.0.0.1:" .. port .. "\n")
while true do
  local client = listener:accept()
  if client then
    local co = coroutine.create(serve)
    local ok, err = coroutine.resume(co, client)
    while ok and coroutine.status(co) == "suspended" do
      ok, err = coroutine.resume(co)
    end
    if not ok then
      io.stderr:write("connection failed: " .. tostring(err) .. "\n")
    end
    client:close()
  end
end
