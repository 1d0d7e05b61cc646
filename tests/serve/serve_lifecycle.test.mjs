// fish serve under pressure and at its end: a full queue answers 503 with
// Retry-After, a client that goes away mid-stream frees its sequence at once,
// SIGTERM lets the running request finish (new ones get 503) and exits 0;
// what is no model file, or a port in use, is a clear error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { execFileSync, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, metrics, until, FISH, STORIES } from './serve_util.mjs';

// A reply that runs to the context's end unless stopped (stories260K: 2048 positions).
const LONG = { model: 'x', prompt: 'Once upon a time', max_tokens: 2000, temperature: 0, ignore_eos: true };

test('a full queue gets 503 with Retry-After; the server keeps serving', async () => {
  const srv = await startServer(['-np', '1', '--queue', '1']);
  try {
    const client = srv.client();
    const running = await client.completions.create({ ...LONG, stream: true });
    const it = running[Symbol.asyncIterator]();
    await it.next();  // it holds the one sequence now
    const queued = client.completions.create({ model: 'x', prompt: '', max_tokens: 4, temperature: 0 });
    assert.ok(await until(async () => (await metrics(srv.url)).fish_requests_queued === 1));
    const r = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'x', max_tokens: 1 }) });
    assert.equal(r.status, 503);
    assert.equal(r.headers.get('retry-after'), '1');
    const e = (await r.json()).error;
    assert.equal(e.code, 'overloaded');
    assert.equal(e.type, 'server_error');
    running.controller.abort();
    const q = await queued;  // the queued one runs once the sequence is free
    assert.equal(q.usage.completion_tokens, 4);
    const m = await metrics(srv.url);
    assert.equal(m.fish_requests_rejected_total, 1);
  } finally {
    await srv.stop();
  }
});

test('a client that disconnects mid-stream frees its sequence at once', async () => {
  const srv = await startServer(['-np', '1']);
  try {
    const client = srv.client();
    const stream = await client.completions.create({ ...LONG, stream: true });
    let n = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.text) ++n;
      if (n >= 3) break;  // leaving the loop aborts the request
    }
    const t0 = Date.now();
    assert.ok(await until(async () => {
      const m = await metrics(srv.url);
      return m.fish_requests_running === 0 && m.fish_requests_cancelled_total === 1;
    }, 2000), 'the sequence was not freed within 2 s');
    const freed_ms = Date.now() - t0;
    const m = await metrics(srv.url);
    assert.ok(m.fish_generated_tokens_total < 2000, `generated ${m.fish_generated_tokens_total}`);
    console.log(`disconnect: sequence freed ${freed_ms} ms after the client left, ${m.fish_generated_tokens_total} tokens generated`);
    // The freed sequence serves the next request.
    const r = await client.completions.create({ model: 'x', prompt: '', max_tokens: 3, temperature: 0 });
    assert.equal(r.usage.completion_tokens, 3);
  } finally {
    await srv.stop();
  }
});

test('SIGTERM: the running request finishes, new ones get 503, then the server exits 0', async () => {
  const srv = await startServer(['-np', '2']);
  try {
    const client = srv.client();
    const stream = await client.completions.create({ ...LONG, max_tokens: 1500, stream: true });
    const it = stream[Symbol.asyncIterator]();
    const first = await it.next();
    const exited = once(srv.proc, 'exit');
    srv.proc.kill('SIGTERM');
    assert.ok(await until(() => srv.stderr().includes('SIGTERM: finishing the requests accepted')));
    const r = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'x', max_tokens: 1 }) });
    assert.equal(r.status, 503);
    assert.equal((await r.json()).error.code, 'shutting_down');
    assert.equal((await fetch(`${srv.url}/health`)).status, 503);
    // The rest of the stream arrives whole.
    let text = first.value.choices[0]?.text ?? '';
    let finish = null;
    let usage = null;
    for (let c = await it.next(); !c.done; c = await it.next()) {
      text += c.value.choices[0]?.text ?? '';
      finish = c.value.choices[0]?.finish_reason ?? finish;
      usage = c.value.usage ?? usage;
    }
    assert.equal(finish, 'length');
    assert.equal(usage.completion_tokens, 1500);
    assert.ok(text.length > 1500);
    const [code] = await exited;
    assert.equal(code, 0);
    assert.match(srv.stderr(), /fish serve: stopped\n$/);
  } finally {
    await srv.stop();
  }
});

test('a FIFO or a folder as the model is refused at once, and a port in use is an error', async () => {
  const fifo = join(tmpdir(), `fish-serve-fifo-${process.pid}.gguf`);
  execFileSync('mkfifo', [fifo]);
  try {
    const r = spawnSync(FISH, ['serve', '-m', fifo, '--port', '0'], { encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 1);
    assert.equal(r.stderr, `fish serve: ${fifo}: not a regular file (a FIFO)\n`);
  } finally {
    execFileSync('rm', ['-f', fifo]);
  }
  const d = spawnSync(FISH, ['serve', '-m', tmpdir(), '--port', '0'], { encoding: 'utf8', timeout: 20000 });
  assert.equal(d.status, 1);
  assert.match(d.stderr, /not a regular file \(a directory\)/);
  const srv = await startServer(['-np', '1']);
  try {
    const port = new URL(srv.url).port;
    const r = spawnSync(FISH, ['serve', '-m', STORIES, '--port', port], { encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 1);
    assert.match(r.stderr, new RegExp(`fish serve: cannot listen on 127\\.0\\.0\\.1:${port} \\(in use`));
  } finally {
    await srv.stop();
  }
});
