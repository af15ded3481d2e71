'use strict'
// examples/node: the master and slave scripts, each in its own process, replicate and stop
// cleanly on SIGINT.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const { cleanup, killChild, tmpStore, waitFor, exitOf } = require('./helpers')

const examples = path.join(__dirname, '..', '..', 'examples', 'node')

function run(t, script, args) {
  const child = spawn(process.execPath, [path.join(examples, script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  const proc = { child, out: '' }
  child.stdout.on('data', (d) => (proc.out += d))
  child.stderr.on('data', (d) => (proc.out += d))
  cleanup(t, () => killChild(child))
  return proc
}

test('examples/node master.js and slave.js replicate and close on SIGINT', async (t) => {
  const master = run(t, 'master.js', ['--dir', tmpStore(t, 'ex-master'), '--interval', '50'])
  const haPort = await waitFor('the master to start', () => master.out.match(/HA port (\d+)/)?.[1])
  const slave = run(t, 'slave.js', ['--master', `127.0.0.1:${haPort}`, '--dir', tmpStore(t, 'ex-slave'), '--interval', '50'])
  await waitFor('a replicated put', () => /PUT_OK/.test(master.out), 20000)
  await waitFor('the slave to show a message', () => /replicated: hello #1 /.test(slave.out), 20000)

  slave.child.kill('SIGINT')
  assert.equal(await exitOf(slave.child, 20000), 0, slave.out)
  assert.match(slave.out, /closed/)
  master.child.kill('SIGINT')
  assert.equal(await exitOf(master.child, 20000), 0, master.out)
  assert.match(master.out, /closed/)
})

test('examples/node master.js and slave.js remove the temporary stores they made', async (t) => {
  const master = run(t, 'master.js', ['--role', 'ASYNC_MASTER', '--interval', '50'])
  const haPort = await waitFor('the master to start', () => master.out.match(/HA port (\d+)/)?.[1])
  const slave = run(t, 'slave.js', ['--master', `127.0.0.1:${haPort}`, '--interval', '50'])
  await waitFor('the slave to show a message', () => /replicated: hello #1 /.test(slave.out), 20000)
  for (const p of [slave, master]) {
    const dir = p.out.match(/store (\S+)/)[1]
    assert.ok(fs.existsSync(dir), `${dir} should exist while the broker runs`)
    p.child.kill('SIGINT')
    assert.equal(await exitOf(p.child, 20000), 0, p.out)
    assert.match(p.out, new RegExp(`removed ${dir}`))
    assert.equal(fs.existsSync(dir), false, `${dir} was left behind`)
  }
})
