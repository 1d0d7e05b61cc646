// Shared by fish serve's node tests: start a server on a free loopback port,
// an OpenAI client for it, fish's own commands for reference outputs, and
// /metrics as numbers. FISH_BIN and FISH_MODELS come from CTest.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import OpenAI from 'openai';

export const FISH = process.env.FISH_BIN;
export const MODELS = process.env.FISH_MODELS;
if (!FISH || !MODELS) throw new Error('FISH_BIN and FISH_MODELS must be set (CTest sets them)');
export const STORIES = `${MODELS}/stories260K.gguf`;

// The greedy text stories260K writes after BOS alone (48 tokens): the llama2.c
// README's reference, as ../shared/models/SOURCES.md gives it.
export const STORIES_FROM_BOS =
  ' Once upon a time, there was a little girl named Lily. She loved to play outside in the park.' +
  ' One day, she saw a big, red ball. She wanted to';

// Starts `fish serve -m model --port 0 ...args`; resolves once it listens.
export async function startServer(args = [], { model = STORIES } = {}) {
  const proc = spawn(FISH, ['serve', '-m', model, '--port', '0', '-t', '2', '-ngl', '0', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fish serve did not start in 60 s: ${stderr}`)), 60000);
    proc.stderr.on('data', (d) => {
      stderr += d;
      const m = stderr.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`fish serve exited (${code}): ${stderr}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    proc,
    url,
    stderr: () => stderr,
    client: (opts = {}) =>
      new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000, ...opts }),
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGKILL');
        await once(proc, 'exit');
      }
    },
  };
}

// `fish <args>` with stdin; its stdout (throws on a non-zero exit).
export function fish(args, input = '') {
  const r = spawnSync(FISH, args, { input, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`fish ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

// /metrics as {name: value} (labelled series under their full text).
export async function metrics(url, headers = {}) {
  const text = await (await fetch(`${url}/metrics`, { headers })).text();
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

// Polls fn() until it returns true or timeout_ms passes; its last value.
export async function until(fn, timeout_ms = 5000) {
  const t0 = Date.now();
  for (;;) {
    if (await fn()) return true;
    if (Date.now() - t0 > timeout_ms) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Collects a streamed completion: text, the chunks, finish_reason, usage.
export async function collect(stream, chat) {
  let text = '';
  let finish = null;
  let usage = null;
  const chunks = [];
  for await (const c of stream) {
    chunks.push(c);
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text += (chat ? ch.delta?.content : ch.text) ?? '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { text, finish, usage, chunks };
}

export function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}
