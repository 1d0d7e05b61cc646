// 16 concurrent streaming requests (completions and chat, prompts of
// different lengths) on a server batching 4 sequences with prompt chunks of
// 64 rows: each greedy output equals the one a server of one sequence gave
// the same request alone, one request after the other.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, collect, metrics } from './serve_util.mjs';

const names = ['Lily', 'Ben', 'Tom', 'Sue', 'Max', 'Mia', 'Sam', 'Zoe'];
const requests = [];
for (let i = 0; i < 12; ++i) {
  // Some share a long beginning (the prefix cache), some are longer than a prompt chunk.
  const story = 'Once upon a time, there was a little girl who loved to play in the park with her friends. '.repeat(1 + (i % 4));
  requests.push({ chat: false, prompt: `${i % 2 ? story : ''}${names[i % 8]} went to the ${['park', 'shop', 'sea'][i % 3]} and` });
}
for (let i = 0; i < 4; ++i) requests.push({ chat: true, messages: [{ role: 'user', content: `Tell me about ${names[i]}.` }] });

async function run(client, r, stream) {
  const base = { model: 'x', max_tokens: 24, temperature: 0, stream };
  if (r.chat) {
    const out = await client.chat.completions.create({ ...base, messages: r.messages });
    return stream ? collect(out, true) : { text: out.choices[0].message.content, finish: out.choices[0].finish_reason, usage: out.usage };
  }
  const out = await client.completions.create({ ...base, prompt: r.prompt });
  return stream ? collect(out, false) : { text: out.choices[0].text, finish: out.choices[0].finish_reason, usage: out.usage };
}

test('16 concurrent streams equal the sequential answers', async () => {
  const one = await startServer(['-np', '1', '--fallback']);
  const sequential = [];
  try {
    for (const r of requests) sequential.push(await run(one.client(), r, false));
  } finally {
    await one.stop();
  }
  const many = await startServer(['-np', '4', '-b', '64', '--fallback']);
  try {
    const client = many.client();
    const t0 = Date.now();
    const concurrent = await Promise.all(requests.map((r) => run(client, r, true)));
    const secs = (Date.now() - t0) / 1000;
    for (let i = 0; i < requests.length; ++i) {
      assert.equal(concurrent[i].text, sequential[i].text, `request ${i}`);
      assert.equal(concurrent[i].finish, sequential[i].finish, `request ${i}`);
      assert.equal(concurrent[i].usage.prompt_tokens, sequential[i].usage.prompt_tokens, `request ${i}`);
      assert.equal(concurrent[i].usage.completion_tokens, sequential[i].usage.completion_tokens, `request ${i}`);
    }
    const m = await metrics(many.url);
    assert.equal(m.fish_requests_finished_total, requests.length);
    assert.equal(m.fish_requests_running, 0);
    // Steps batched several sequences: fewer evaluations than tokens.
    assert.ok(m.fish_decode_steps_total < m.fish_generated_tokens_total, JSON.stringify(m));
    const tokens = concurrent.reduce((n, c) => n + c.usage.completion_tokens, 0);
    console.log(`16 concurrent streams: ${tokens} tokens in ${secs.toFixed(2)} s, ${m.fish_decode_steps_total} steps`);
  } finally {
    await many.stop();
  }
});
