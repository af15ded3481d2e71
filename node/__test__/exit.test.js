'use strict'
// After close() nothing of the binding keeps a Node process alive: no threadsafe function
// references, no threads. The child process must exit by itself.

const test = require('node:test')
const assert = require('node:assert/strict')

const { childReport } = require('./helpers')

test('the process exits by itself after close()', async () => {
  const report = await childReport('exit-child.js')
  assert.equal(report.ok, 200)
  assert.equal(typeof report.late, 'string')
})

test('pending putMessage promises keep the process alive until they settle', async () => {
  // Without the hold on the event loop the process ended before any answer came back.
  assert.deepEqual(await childReport('pending-child.js'), { PUT_OK: 100 })
})
