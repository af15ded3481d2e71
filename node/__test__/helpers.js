'use strict'
// Shared by the tests: temporary stores, configs bound to 127.0.0.1 with free ports, waits on
// conditions with deadlines, and a broker running in a child Node process.

const assert = require('node:assert/strict')
const { fork, spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const cleanups = new WeakMap()

/**
 * Runs `fn` once the test is over, before everything registered with `cleanup` earlier (last
 * in, first out, as Go's `t.Cleanup`). node:test runs `t.after` hooks in the order they were
 * added, so a store removed by a hook added before its broker's `close()` came back: closing
 * persists the broker's config files into it. Every hook runs; the first error is thrown.
 */
function cleanup(t, fn) {
  let stack = cleanups.get(t)
  if (!stack) {
    stack = []
    cleanups.set(t, stack)
    t.after(async () => {
      let failed = null
      while (stack.length > 0) {
        try {
          await stack.pop()()
        } catch (e) {
          failed ??= e
        }
      }
      if (failed) throw failed
    })
  }
  stack.push(fn)
}

/** A fresh store directory under os.tmpdir(), removed after the test (after anything using it
 * that was registered with `cleanup` later). */
function tmpStore(t, name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `rmqha-node-${name}-`))
  cleanup(t, () => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Kills a child process (continuing it first, should it be stopped) and waits until it is
 * gone, so that it writes nothing more into a directory about to be removed. */
async function killChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return
  const gone = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGCONT')
  child.kill('SIGKILL')
  await gone
}

/** A broker config for tests: 127.0.0.1, ports picked by the OS, small files. */
function brokerConfig(dir, role, extra = {}) {
  return {
    storePathRootDir: dir,
    brokerRole: role,
    brokerName: 'broker-a',
    brokerId: role === 'SLAVE' ? 1 : 0,
    bindAddress: '127.0.0.1',
    brokerIP1: '127.0.0.1',
    listenPort: 0,
    haListenPort: 0,
    mappedFileSizeCommitLog: 65536,
    mappedFileSizeConsumeQueue: 2000,
    maxHashSlotNum: 64,
    maxIndexNum: 256,
    flushIntervalCommitLog: 50,
    flushIntervalConsumeQueue: 50,
    ...extra,
  }
}

/** Polls `cond` (sync or async) until it is truthy; fails after `timeoutMs`. */
async function waitFor(what, cond, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await cond()
    if (v) return v
    if (Date.now() >= deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

/**
 * Stops a child process with SIGSTOP and waits until every one of its threads is stopped:
 * kill(2) only queues the signal, and a thread on another CPU (or a descheduled vCPU) runs on
 * for a moment, long enough to ack a few puts.
 */
async function freeze(child) {
  child.kill('SIGSTOP')
  const task = `/proc/${child.pid}/task`
  const stopped = () =>
    fs.readdirSync(task).every((tid) => {
      let stat = ''
      try {
        stat = fs.readFileSync(`${task}/${tid}/stat`, 'utf8')
      } catch {
        return true // the thread is gone
      }
      // The state is the field after the parenthesised command name.
      return /^[Tt]/.test(stat.slice(stat.lastIndexOf(') ') + 2))
    })
  await waitFor(`process ${child.pid} to stop`, stopped)
}

/** Resolves with the exit code of a child process, or fails after `timeoutMs`. */
function exitOf(child, timeoutMs) {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null) return resolve(child.exitCode)
    const timer = setTimeout(() => reject(new Error(`child ${child.pid} still running after ${timeoutMs} ms`)), timeoutMs)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      resolve(code ?? signal)
    })
  })
}

/**
 * Runs `script` (a file in this directory) in a child Node process and resolves with the JSON
 * of its last stdout line. Fails unless the child exits 0 within `timeoutMs`.
 */
async function childReport(script, args = [], timeoutMs = 30000) {
  const child = spawn(process.execPath, [path.join(__dirname, script), ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  let code
  try {
    code = await exitOf(child, timeoutMs)
  } finally {
    child.kill('SIGKILL')
  }
  assert.equal(code, 0, `${script} exited with ${code}: ${out}`)
  return JSON.parse(out.trim().split('\n').pop())
}

/**
 * A broker in another Node process (`broker-child.js`), driven over IPC. `request(cmd, args)`
 * resolves with the child's answer or rejects with an Error carrying the child's `code`.
 */
async function startBrokerProcess(t, role, config) {
  const child = fork(path.join(__dirname, 'broker-child.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const pending = new Map()
  let nextId = 0
  child.on('message', (m) => {
    const p = pending.get(m.id)
    if (!p) return
    pending.delete(m.id)
    if (m.ok) p.resolve(m.value)
    else p.reject(Object.assign(new Error(m.message), { code: m.code, putStatus: m.putStatus }))
  })
  child.on('exit', () => {
    for (const p of pending.values()) p.reject(new Error('broker child exited'))
    pending.clear()
  })
  cleanup(t, () => killChild(child))
  const request = (cmd, args = {}) =>
    new Promise((resolve, reject) => {
      const id = nextId++
      pending.set(id, { resolve, reject })
      child.send({ id, cmd, args })
    })
  const info = await request('start', { role, config })
  return { child, request, ...info }
}

module.exports = { cleanup, killChild, tmpStore, brokerConfig, waitFor, freeze, exitOf, childReport, startBrokerProcess }
