// fish serve through the official OpenAI client: models, completions and
// chat completions (whole and streamed) with exact greedy texts, usage,
// logprobs, stop strings, /tokenize and /detokenize, /health and /metrics,
// the API key, and bad requests answered with 4xx while the server goes on.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, fish, collect, metrics, STORIES, STORIES_FROM_BOS } from './serve_util.mjs';

let srv;
let client;
const CHATML_HELLO = '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n';

before(async () => {
  srv = await startServer(['-np', '2', '--fallback']);
  client = srv.client();
});
after(async () => srv.stop());

test('models: the one model, named after its file', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ['stories260K.gguf']);
  assert.equal(list.data[0].object, 'model');
  const one = await client.models.retrieve('stories260K.gguf');
  assert.equal(one.id, 'stories260K.gguf');
  await assert.rejects(client.models.retrieve('other'), (e) => e instanceof OpenAI.NotFoundError);
});

test('completions: greedy text from BOS is the reference text, with usage', async () => {
  const r = await client.completions.create({ model: 'x', prompt: '', max_tokens: 48, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, STORIES_FROM_BOS);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.deepEqual(
    { p: r.usage.prompt_tokens, c: r.usage.completion_tokens, t: r.usage.total_tokens },
    { p: 1, c: 48, t: 49 },
  );
  // Token ids as the prompt: the same.
  const r2 = await client.completions.create({ model: 'x', prompt: [1], max_tokens: 48, temperature: 0 });
  assert.equal(r2.choices[0].text, STORIES_FROM_BOS);
});

test('completions: equal to fish run, streamed or not; stop strings', async () => {
  const ref = fish(['run', '-m', STORIES, '-p', 'Once upon a time', '-n', '30', '--temp', '0', '-t', '2', '-ngl', '0']).replace(/\n$/, '');
  const r = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 30, temperature: 0 });
  assert.equal(r.choices[0].text, ref);
  assert.equal(r.usage.completion_tokens, 30);
  const s = await collect(
    await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stream: true }),
    false,
  );
  assert.equal(s.text, ref);
  assert.equal(s.finish, 'length');
  assert.equal(s.usage.completion_tokens, 30);
  assert.ok(s.chunks.length >= 2);
  // A stop string ends the text before it, streamed or not.
  const cut = STORIES_FROM_BOS.indexOf('Lily');
  for (const stream of [false, true]) {
    const req = { model: 'x', prompt: '', max_tokens: 48, temperature: 0, stop: ['Lily', 'zzz'], stream };
    const out = stream ? await collect(await client.completions.create(req), false) : await client.completions.create(req);
    const text = stream ? out.text : out.choices[0].text;
    const finish = stream ? out.finish : out.choices[0].finish_reason;
    assert.equal(text, STORIES_FROM_BOS.slice(0, cut));
    assert.equal(finish, 'stop');
  }
});

test('chat: the ChatML fallback; the same reply as fish chat and as the rendered prompt, streamed or not', async () => {
  const ref = fish(['chat', '-m', STORIES, '--fallback', '--temp', '0', '-n', '16', '-t', '2', '-ngl', '0'], 'Hello\n').replace(/\n$/, '');
  const msgs = [{ role: 'user', content: 'Hello' }];
  const r = await client.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 16, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].message.content, ref);
  assert.equal(r.usage.completion_tokens, 16);
  const c = await client.completions.create({ model: 'x', prompt: CHATML_HELLO, max_tokens: 16, temperature: 0 });
  assert.equal(c.choices[0].text, ref);
  assert.equal(c.usage.prompt_tokens, r.usage.prompt_tokens);
  const s = await collect(
    await client.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 16, temperature: 0, stream: true }),
    true,
  );
  assert.equal(s.text, ref);
  assert.equal(s.chunks[0].choices[0].delta.role, 'assistant');
  assert.equal(s.finish, 'length');
  // Text parts are content too.
  const parts = await client.chat.completions.create({
    model: 'x', messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }], max_tokens: 16, temperature: 0,
  });
  assert.equal(parts.choices[0].message.content, ref);
  // stream_options.include_usage: a last chunk without choices.
  const u = await collect(
    await client.chat.completions.create({
      model: 'x', messages: msgs, max_tokens: 4, temperature: 0, stream: true, stream_options: { include_usage: true },
    }),
    true,
  );
  const last = u.chunks[u.chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 4);
});

test('the prefix cache: a repeated prompt is served from it', async () => {
  const prompt = 'Lily and Ben went to the park to play with a ball.';
  const a = await client.completions.create({ model: 'x', prompt, max_tokens: 8, temperature: 0 });
  const b = await client.completions.create({ model: 'x', prompt, max_tokens: 8, temperature: 0 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.equal(b.usage.prompt_tokens_details.cached_tokens, b.usage.prompt_tokens - 1);
});

test('logprobs: chat (top_logprobs) and completions, greedy = the likeliest', async () => {
  const r = await client.chat.completions.create({
    model: 'x', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 8);
  assert.equal(lp.map((t) => t.token).join(''), r.choices[0].message.content);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    assert.ok(t.top_logprobs[1].logprob <= t.top_logprobs[0].logprob);
    assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
  }
  const c = await client.completions.create({ model: 'x', prompt: '', max_tokens: 6, temperature: 0, logprobs: 2 });
  const l = c.choices[0].logprobs;
  assert.equal(l.tokens.join(''), c.choices[0].text);
  assert.equal(l.token_logprobs.length, 6);
  assert.deepEqual(l.text_offset, l.tokens.map((_, i) => l.tokens.slice(0, i).join('').length));
  for (let i = 0; i < 6; ++i) assert.equal(l.top_logprobs[i][l.tokens[i]], l.token_logprobs[i]);
  // Streamed: the same tokens, the same values.
  const s = await collect(
    await client.completions.create({ model: 'x', prompt: '', max_tokens: 6, temperature: 0, logprobs: 2, stream: true }),
    false,
  );
  const streamed = s.chunks.flatMap((ch) => ch.choices[0].logprobs?.token_logprobs ?? []);
  assert.deepEqual(streamed, l.token_logprobs);
});

test('sampling: a seed makes a sampled completion repeatable', async () => {
  const req = { model: 'x', prompt: 'Once', max_tokens: 24, temperature: 1.0, top_p: 0.9, top_k: 40, min_p: 0.01, seed: 7 };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  assert.equal(a.choices[0].text, b.choices[0].text);
});

test('/tokenize, /detokenize, /health, /metrics', async () => {
  const tok = await (await fetch(`${srv.url}/tokenize`, { method: 'POST', body: JSON.stringify({ content: 'Hello world' }) })).json();
  const ids = fish(['tokenize', '-m', STORIES, '-p', 'Hello world']).trim().split(' ').map(Number);
  assert.deepEqual(tok.tokens, ids);
  const pieces = await (await fetch(`${srv.url}/tokenize`, {
    method: 'POST', body: JSON.stringify({ content: 'Hello', add_special: false, with_pieces: true }),
  })).json();
  assert.equal(pieces.tokens.map((t) => t.piece).join(''), ' Hello');
  const de = await (await fetch(`${srv.url}/detokenize`, { method: 'POST', body: JSON.stringify({ tokens: ids }) })).json();
  assert.equal(de.content, 'Hello world');
  const h = await fetch(`${srv.url}/health`);
  assert.equal(h.status, 200);
  assert.deepEqual(await h.json(), { status: 'ok' });
  const m = await metrics(srv.url);
  assert.ok(m.fish_generated_tokens_total > 0);
  assert.equal(m.fish_requests_running, 0);
  assert.equal(m.fish_slots, 2);
  assert.ok(m['fish_http_requests_total{path="/v1/completions",code="200"}'] > 0);
  assert.ok(m.fish_prompt_tokens_per_second > 0 && m.fish_generation_tokens_per_second > 0);
});

test('response_format json_object: the reply is held to one JSON object', async () => {
  // stories260K writes no JSON of its own: the constraint alone makes the reply start an object
  // (whitespace first, at most 32 in a row), and the parsed text never goes past one.
  const r = await client.chat.completions.create({
    model: 'x', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 40, temperature: 0,
    response_format: { type: 'json_object' },
  });
  const text = r.choices[0].message.content;
  assert.match(text, /^\s{0,32}\{/);
  if (r.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(text), 'object');
});

test('response_format json_schema: the reply follows the schema, streamed or not; a schema fish does not enforce is a 400', async () => {
  // stories260K pads with whitespace between tokens (runs of up to 32): the reply still fits its context.
  const schema = {
    type: 'object',
    properties: { answer: { type: 'string', maxLength: 12 }, sure: { type: 'boolean' }, n: { type: 'integer' } },
    required: ['answer', 'sure', 'n'],
    additionalProperties: false,
  };
  for (const stream of [false, true]) {
    for (const temperature of [0, 1]) {
      const req = {
        model: 'x', messages: [{ role: 'user', content: 'Hello' }], temperature, seed: 3, stream,
        response_format: { type: 'json_schema', json_schema: { name: 'reply', strict: true, schema } },
      };
      const r = await client.chat.completions.create(req);
      const { text, finish } = stream ? await collect(r, true) : { text: r.choices[0].message.content, finish: r.choices[0].finish_reason };
      assert.equal(finish, 'stop', text);
      const v = JSON.parse(text);
      assert.deepEqual(Object.keys(v).sort(), ['answer', 'n', 'sure'], text);
      assert.equal(typeof v.answer, 'string');
      assert.ok([...v.answer].length <= 12, text);
      assert.equal(typeof v.sure, 'boolean');
      assert.ok(Number.isInteger(v.n), text);
    }
  }
  // /v1/completions takes it too: a top-level enum.
  const c = await client.completions.create({
    model: 'x', prompt: 'Once upon a time', temperature: 0, max_tokens: 200,
    response_format: { type: 'json_schema', json_schema: { name: 'yn', schema: { enum: ['yes', 'no'] } } },
  });
  assert.ok(['yes', 'no'].includes(JSON.parse(c.choices[0].text)), c.choices[0].text);
  // Keywords fish does not enforce are refused by name and JSON pointer, never ignored.
  await assert.rejects(
    client.chat.completions.create({
      model: 'x', messages: [{ role: 'user', content: 'Hi' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { zip: { type: 'string', pattern: '^[0-9]+$' } } } } },
    }),
    (err) => err.status === 400 && err.param === 'response_format' &&
      err.error?.message === "'response_format.json_schema.schema': keyword 'pattern' at /properties/zip/pattern is not supported",
  );
  await assert.rejects(
    client.chat.completions.create({
      model: 'x', messages: [{ role: 'user', content: 'Hi' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#' } } },
    }),
    (err) => err.status === 400 && /describes no value/.test(err.message),
  );
});

test('logit_bias: -100 bans the greedy token, +100 forces another; ids past the vocabulary are a 400', async () => {
  const base = { model: 'x', prompt: '', max_tokens: 1, temperature: 0, logprobs: 1 };
  const plain = await client.completions.create(base);
  const first = plain.choices[0].text;
  const tok = await (await fetch(`${srv.url}/tokenize`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ content: first }),
  })).json();
  const id = tok.tokens[tok.tokens.length - 1];
  const banned = await client.completions.create({ ...base, logit_bias: { [id]: -100 } });
  assert.notEqual(banned.choices[0].text, first);
  const forced = await client.completions.create({ ...base, logit_bias: { 300: 100 } });
  const t300 = await (await fetch(`${srv.url}/detokenize`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokens: [300] }),
  })).json();
  assert.equal(forced.choices[0].text.trim(), t300.content.trim());  // /detokenize drops SentencePiece's leading space
  await assert.rejects(client.completions.create({ ...base, logit_bias: { 100000: 1 } }),
    (err) => err.status === 400 && err.param === 'logit_bias' && /outside the vocabulary/.test(err.message));
});

test('bad requests get a 4xx with an OpenAI error body, and the server goes on', async () => {
  const post = (path, body) => fetch(`${srv.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  let r = await post('/v1/chat/completions', '{"messages": [');
  assert.equal(r.status, 400);
  let e = (await r.json()).error;
  assert.equal(e.type, 'invalid_request_error');
  assert.match(e.message, /^the request body is not valid JSON: /);
  r = await post('/v1/completions', '[1, 2]');
  assert.equal(r.status, 400);
  // 100,000 levels of brackets in "tools" (a 200 KB body) overflowed a thread's stack and killed the server.
  const deep = '['.repeat(100000) + ']'.repeat(100000);
  r = await post('/v1/chat/completions', `{"messages": [{"role": "user", "content": "Hi"}], "tools": ${deep}}`);
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.message, 'the request body nests arrays and objects more than 128 levels deep');
  const bad = async (body, param, re) => {
    await assert.rejects(client.completions.create(body), (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.status, 400);
      assert.equal(err.error?.param ?? err.param, param);
      if (re) assert.match(err.message, re);
      return true;
    });
  };
  await bad({ model: 'x', prompt: 'Hi', max_tokens: 'ten' }, 'max_tokens', /must be an integer/);
  await bad({ model: 'x', prompt: 'Hi', temperature: 'hot' }, 'temperature', /must be a number/);
  await bad({ model: 'x', prompt: 'Hi', top_p: 3 }, 'top_p', /between 0 and 1/);
  await bad({ model: 'x', prompt: 'Hi', stop: [1] }, 'stop');
  await bad({ model: 'x', prompt: 'Hi', n: 2 }, 'n');
  await bad({ model: 'x', prompt: { text: 'Hi' } }, 'prompt');
  await bad({ model: 'x', prompt: [100000] }, 'prompt', /outside the vocabulary/);
  await bad({ model: 'x', prompt: 'Hi', logprobs: 50 }, 'logprobs');
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: [] }), (err) => err.status === 400 && err.param === 'messages');
  await assert.rejects(
    client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }),
    (err) => err.status === 400 && /not supported/.test(err.message),
  );
  // Over-long: more tokens than the context holds.
  const long = 'Once upon a time there was a little girl. '.repeat(400);
  await assert.rejects(client.completions.create({ model: 'x', prompt: long, max_tokens: 4 }), (err) => {
    assert.equal(err.status, 400);
    assert.equal(err.code, 'context_length_exceeded');
    return true;
  });
  r = await fetch(`${srv.url}/v1/nothing-here`);
  assert.equal(r.status, 404);
  e = (await r.json()).error;
  assert.equal(e.message, 'unknown request URL: GET /v1/nothing-here');
  r = await post('/tokenize', '{"content": 5}');
  assert.equal(r.status, 400);
  r = await post('/detokenize', '{"tokens": [-1]}');
  assert.equal(r.status, 400);
  // Still serving.
  const ok = await client.completions.create({ model: 'x', prompt: '', max_tokens: 48, temperature: 0 });
  assert.equal(ok.choices[0].text, STORIES_FROM_BOS);
  const m = await metrics(srv.url);
  assert.ok(m['fish_http_requests_total{path="/v1/completions",code="400"}'] >= 9);
  assert.ok(m['fish_http_requests_total{path="/v1/chat/completions",code="400"}'] >= 3);
});

test('--api-key: 401 without the key or with a wrong one; /health stays open; no template, no chat', async () => {
  const keyed = await startServer(['--api-key', 'sesame', '-np', '1']);
  try {
    for (const apiKey of ['wrong', 'sesame-but-longer']) {
      await assert.rejects(keyed.client({ apiKey }).models.list(), (err) => {
        assert.ok(err instanceof OpenAI.AuthenticationError, String(err));
        assert.equal(err.status, 401);
        assert.equal(err.code, 'invalid_api_key');
        return true;
      });
    }
    const bare = await fetch(`${keyed.url}/v1/completions`, { method: 'POST', body: '{"prompt": "x"}' });
    assert.equal(bare.status, 401);
    assert.equal((await fetch(`${keyed.url}/metrics`)).status, 401);
    assert.equal((await fetch(`${keyed.url}/health`)).status, 200);
    const good = keyed.client({ apiKey: 'sesame' });
    assert.equal((await good.models.list()).data.length, 1);
    const r = await good.completions.create({ model: 'x', prompt: '', max_tokens: 48, temperature: 0 });
    assert.equal(r.choices[0].text, STORIES_FROM_BOS);
    // Without --fallback a model with no chat template takes completions only.
    await assert.rejects(good.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'Hi' }] }), (err) => {
      assert.equal(err.status, 400);
      assert.match(err.message, /the model has no chat template: use \/v1\/completions, or start fish serve with --fallback/);
      return true;
    });
  } finally {
    await keyed.stop();
  }
});
