'use strict'
// After close() nothing of the binding keeps a Node process alive: no threadsafe function
// references, no threads. The child process must exit by itself.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')

const { exitOf } = require('./helpers')

test('the process exits by itself after close()', async () => {
  const child = spawn(process.execPath, [path.join(__dirname, 'exit-child.js')], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  let code
  try {
    code = await exitOf(child, 30000)
  } finally {
    child.kill('SIGKILL')
  }
  assert.equal(code, 0, out)
  const report = JSON.parse(out.trim().split('\n').pop())
  assert.equal(report.ok, 200)
  assert.equal(typeof report.late, 'string')
})

test('pending putMessage promises keep the process alive until they settle', async () => {
  const child = spawn(process.execPath, [path.join(__dirname, 'pending-child.js')], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  let code
  try {
    code = await exitOf(child, 30000)
  } finally {
    child.kill('SIGKILL')
  }
  assert.equal(code, 0, out)
  // Without the hold on the event loop the process ended before any answer came back.
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), { PUT_OK: 100 })
})
