// A bounded load test over loopback: 200 requests from 32 clients (half of
// them streamed, completions and chat) against `fish serve -np 4`. None may
// be lost or fail; it reports throughput and latency percentiles (and time to
// first token for the streamed ones). Knobs: FISH_LOAD_REQUESTS,
// FISH_LOAD_CLIENTS, FISH_LOAD_NP, FISH_LOAD_MAX_TOKENS, FISH_LOAD_MODEL (a
// GGUF path), FISH_LOAD_ARGS (more fish serve flags, space-separated).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, metrics, percentile, STORIES } from './serve_util.mjs';

const N = Number(process.env.FISH_LOAD_REQUESTS ?? 200);
const CLIENTS = Number(process.env.FISH_LOAD_CLIENTS ?? 32);
const NP = process.env.FISH_LOAD_NP ?? '4';
const MAX_TOKENS = Number(process.env.FISH_LOAD_MAX_TOKENS ?? 16);
const MODEL = process.env.FISH_LOAD_MODEL ?? STORIES;
const EXTRA = (process.env.FISH_LOAD_ARGS ?? '').split(' ').filter(Boolean);

const subjects = ['a dog', 'a cat', 'a bird', 'a big red ball', 'the sea', 'a little boat', 'a tree', 'the moon'];

function request(i) {
  const stream = i % 2 === 1;
  const chat = i % 4 >= 2;
  const base = { model: 'x', max_tokens: MAX_TOKENS, temperature: 0.8, seed: i, stream };
  if (chat) return { chat, stream, body: { ...base, messages: [{ role: 'user', content: `Tell me a story about ${subjects[i % 8]}.` }] } };
  return { chat, stream, body: { ...base, prompt: `Once upon a time there was ${subjects[i % 8]}. One day` } };
}

async function one(client, i) {
  const r = request(i);
  const t0 = performance.now();
  let ttft = null;
  let tokens = 0;
  let finish = null;
  const api = r.chat ? client.chat.completions : client.completions;
  const out = await api.create(r.body);
  if (r.stream) {
    for await (const c of out) {
      const piece = r.chat ? c.choices[0]?.delta?.content : c.choices[0]?.text;
      if (piece && ttft === null) ttft = performance.now() - t0;
      if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
      if (c.usage) tokens = c.usage.completion_tokens;
    }
  } else {
    tokens = out.usage.completion_tokens;
    finish = out.choices[0].finish_reason;
  }
  assert.ok(finish === 'stop' || finish === 'length', `request ${i}: finish_reason ${finish}`);
  return { ms: performance.now() - t0, ttft, tokens };
}

test(`load: ${N} requests from ${CLIENTS} clients, none lost`, async () => {
  const srv = await startServer(['-np', NP, '--fallback', ...EXTRA], { model: MODEL });
  try {
    const client = srv.client({ timeout: 300000 });
    const results = new Array(N);
    const errors = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        for (let i = next++; i < N; i = next++) {
          try {
            results[i] = await one(client, i);
          } catch (e) {
            errors.push(`request ${i}: ${e}`);
          }
        }
      }),
    );
    const wall = (performance.now() - t0) / 1000;
    assert.deepEqual(errors, []);
    assert.equal(results.filter(Boolean).length, N);
    const m = await metrics(srv.url);
    assert.equal(m.fish_requests_finished_total, N);
    assert.equal(m.fish_requests_failed_total, 0);
    assert.equal(m.fish_requests_rejected_total, 0);
    assert.equal(m.fish_requests_running, 0);
    assert.equal(m.fish_requests_queued, 0);
    const tokens = results.reduce((n, r) => n + r.tokens, 0);
    assert.equal(m.fish_generated_tokens_total, tokens);
    const lat = results.map((r) => r.ms).sort((a, b) => a - b);
    const ttft = results.filter((r) => r.ttft !== null).map((r) => r.ttft).sort((a, b) => a - b);
    const f = (x) => x.toFixed(0);
    console.log(
      `load: ${N} requests, ${CLIENTS} clients, -np ${NP}, max_tokens ${MAX_TOKENS}: ${wall.toFixed(2)} s, ` +
        `${(N / wall).toFixed(1)} req/s, ${(tokens / wall).toFixed(1)} generated tok/s; ` +
        `latency ms p50 ${f(percentile(lat, 50))} p90 ${f(percentile(lat, 90))} p99 ${f(percentile(lat, 99))} max ${f(lat[lat.length - 1])}; ` +
        `time to first token ms (streamed) p50 ${f(percentile(ttft, 50))} p90 ${f(percentile(ttft, 90))} p99 ${f(percentile(ttft, 99))}; ` +
        `${m.fish_decode_steps_total} steps, ${m.fish_prompt_tokens_cached_total} prompt tokens from the prefix cache`,
    );
  } finally {
    await srv.stop();
  }
});
