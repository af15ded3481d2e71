'use strict'
// What the broker's own threads log reaches the process's stderr, at the level RMQHA_LOG
// names (warn by default).

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

function runChild(env) {
  const childEnv = { ...process.env, ...env }
  delete childEnv.RUST_LOG
  if (!('RMQHA_LOG' in env)) delete childEnv.RMQHA_LOG
  return spawnSync(process.execPath, [path.join(__dirname, 'logging-child.js')], {
    env: childEnv,
    encoding: 'utf8',
    timeout: 60000,
  })
}

test("a background thread's warning reaches stderr", () => {
  const run = runChild({})
  assert.equal(run.status, 0, run.stderr)
  assert.match(run.stdout, /done/)
  const line = run.stderr.split('\n').find((l) => l.includes('refusing HA slave'))
  assert.ok(line, run.stderr)
  assert.match(line, /WARN/)
  assert.ok(line.includes(`asking for offset ${2 ** 40}`), line)
})

test('RMQHA_LOG=off silences it', () => {
  const run = runChild({ RMQHA_LOG: 'off' })
  assert.equal(run.status, 0, run.stderr)
  assert.match(run.stdout, /done/)
  assert.ok(!run.stderr.includes('refusing HA slave'), run.stderr)
})
