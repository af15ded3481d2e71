'use strict'
// A broker in a worker thread whose environment ends with putMessage promises pending. Node
// frees the environment's threadsafe functions then; an answer delivered through a freed one
// aborted the whole process (exit 134). Each case runs in a child process, which must exit 0
// and find the worker's store unlocked with its records.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')

const { childReport, tmpStore } = require('./helpers')

function runChild(t, mode) {
  return childReport('worker-child.js', [mode, path.join(tmpStore(t, `worker-${mode}`), 'store')])
}

test('a worker calling process.exit() with puts pending does not take the process down', async (t) => {
  const report = await runChild(t, 'exit')
  assert.equal(report.workerExit, 0)
  // The appends ran on the worker's thread before it exited: all 200 are in the store.
  assert.equal(report.stored, 200)
})

test('terminating a worker with puts pending does not take the process down', async (t) => {
  const report = await runChild(t, 'terminate')
  assert.equal(report.workerExit, 1)
  assert.ok(report.stored > 0, `stored ${report.stored}`)
})
