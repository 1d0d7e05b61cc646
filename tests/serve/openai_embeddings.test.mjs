// fish serve --embeddings through the official OpenAI client: embeddings.create
// with a string, an array of strings and token ids, as floats and as base64
// (the client's default), equal to `fish embed`; dimensions; usage; the 400s
// that name the field; 404 without --embeddings; embeddings while a
// completion generates (neither disturbs the other); many inputs and
// concurrent requests packed over --embeddings-seqs sequences (4 by default)
// give the vectors of a server that takes them one at a time (1).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, fish, STORIES, STORIES_FROM_BOS } from './serve_util.mjs';

let srv;
let client;
const TEXTS = ['Once upon a time, there was a little cat.', 'The dog ran to the park', 'Lily had a big red ball'];

before(async () => {
  srv = await startServer(['-np', '2', '--embeddings']);
  client = srv.client();
});
after(async () => srv.stop());

// `fish embed`'s vector of one text (JSON Lines: one object per input).
function cliEmbedding(text) {
  const out = fish(['embed', '-m', STORIES, '-p', text, '-t', '2', '-ngl', '0']);
  return JSON.parse(out.trim().split('\n')[0]);
}

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('embeddings: a string as floats is fish embed\'s unit vector', async () => {
  const r = await client.embeddings.create({ model: 'x', input: TEXTS[0], encoding_format: 'float' });
  assert.equal(r.object, 'list');
  assert.equal(r.model, 'stories260K.gguf');
  assert.equal(r.data.length, 1);
  assert.equal(r.data[0].object, 'embedding');
  assert.equal(r.data[0].index, 0);
  const v = r.data[0].embedding;
  const cli = cliEmbedding(TEXTS[0]);
  assert.equal(v.length, cli.dim);
  assert.equal(v.length, 64);
  assert.ok(Math.abs(norm(v) - 1) < 1e-5, `norm ${norm(v)}`);
  assert.deepEqual(v.map(Math.fround), cli.embedding.map(Math.fround));
  assert.equal(r.usage.prompt_tokens, cli.n_tokens);
  assert.equal(r.usage.total_tokens, cli.n_tokens);
});

test('embeddings: an array in order, base64 (the client default) equal to floats', async () => {
  const f = await client.embeddings.create({ model: 'x', input: TEXTS, encoding_format: 'float' });
  const b = await client.embeddings.create({ model: 'x', input: TEXTS }); // the client asks for base64, decodes it
  assert.deepEqual(f.data.map((d) => d.index), [0, 1, 2]);
  assert.deepEqual(b.data.map((d) => d.index), [0, 1, 2]);
  for (let i = 0; i < TEXTS.length; ++i) {
    assert.deepEqual(Array.from(b.data[i].embedding), f.data[i].embedding.map(Math.fround));
    const one = await client.embeddings.create({ model: 'x', input: TEXTS[i], encoding_format: 'float' });
    assert.deepEqual(one.data[0].embedding, f.data[i].embedding);
  }
  // The raw base64: 64 little-endian float32 values.
  const raw = await fetch(`${srv.url}/v1/embeddings`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ input: TEXTS[1], encoding_format: 'base64' }),
  });
  const j = await raw.json();
  const bytes = Buffer.from(j.data[0].embedding, 'base64');
  assert.equal(bytes.length, 64 * 4);
  const dec = Array.from({ length: 64 }, (_, k) => bytes.readFloatLE(4 * k));
  assert.deepEqual(dec, f.data[1].embedding.map(Math.fround));
  const sum = f.usage.prompt_tokens;
  assert.equal(sum, TEXTS.map((t) => cliEmbedding(t).n_tokens).reduce((a, c) => a + c, 0));
});

test('embeddings: token ids (one list, or a list of lists) equal the text', async () => {
  const tok = await (await fetch(`${srv.url}/tokenize`, {
    method: 'POST', body: JSON.stringify({ content: TEXTS[2] }),
  })).json();
  const byText = await client.embeddings.create({ model: 'x', input: TEXTS[2], encoding_format: 'float' });
  const one = await client.embeddings.create({ model: 'x', input: tok.tokens, encoding_format: 'float' });
  const many = await client.embeddings.create({ model: 'x', input: [tok.tokens, tok.tokens], encoding_format: 'float' });
  assert.deepEqual(one.data[0].embedding, byText.data[0].embedding);
  assert.equal(many.data.length, 2);
  assert.deepEqual(many.data[1].embedding, byText.data[0].embedding);
  assert.equal(one.usage.prompt_tokens, tok.tokens.length);
});

test('embeddings: dimensions equal to the model\'s is taken, any other is a 400 naming it', async () => {
  const r = await client.embeddings.create({ model: 'x', input: 'hi', dimensions: 64, encoding_format: 'float' });
  assert.equal(r.data[0].embedding.length, 64);
  await assert.rejects(client.embeddings.create({ model: 'x', input: 'hi', dimensions: 32 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'dimensions' && /64/.test(e.message));
});

test('embeddings: bad inputs are 400s naming the field, and the server goes on', async () => {
  const bad = async (body, param, re) => {
    const r = await fetch(`${srv.url}/v1/embeddings`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    assert.equal(r.status, 400, JSON.stringify(body));
    const e = (await r.json()).error;
    assert.equal(e.param, param, JSON.stringify(e));
    if (re) assert.match(e.message, re);
  };
  await bad({}, 'input', /required/);
  await bad({ input: [] }, 'input', /empty/);
  await bad({ input: '' }, 'input', /empty/);
  await bad({ input: ['a', ''] }, 'input', /empty/);
  await bad({ input: 5 }, 'input');
  await bad({ input: ['a', 5] }, 'input');
  await bad({ input: [[1, 2], []] }, 'input', /empty/);
  await bad({ input: [1, -2] }, 'input');
  await bad({ input: [1, 100000] }, 'input', /vocabulary/);
  await bad({ input: new Array(3000).fill(5) }, 'input', /context length/);
  await bad({ input: new Array(2049).fill('a') }, 'input', /2048/);
  await bad({ input: 'a', encoding_format: 'int8' }, 'encoding_format');
  await bad({ input: 'a', dimensions: 'x' }, 'dimensions');
  await bad({ input: 'a', model: 3 }, 'model');
  await assert.rejects(client.embeddings.create({ model: 'x', input: [] }), (e) => e instanceof OpenAI.BadRequestError);
  const ok = await client.embeddings.create({ model: 'x', input: 'still here', encoding_format: 'float' });
  assert.equal(ok.data[0].embedding.length, 64);
});

test('embeddings: requests while a completion generates leave its text and their vectors unchanged', async () => {
  const want = (await client.embeddings.create({ model: 'x', input: TEXTS, encoding_format: 'float' })).data;
  const gen = client.completions.create({ model: 'x', prompt: '', max_tokens: 48, temperature: 0 });
  const embs = Array.from({ length: 6 }, (_, i) =>
    client.embeddings.create({ model: 'x', input: TEXTS[i % 3], encoding_format: 'float' }));
  const [g, ...es] = await Promise.all([gen, ...embs]);
  assert.equal(g.choices[0].text, STORIES_FROM_BOS);
  es.forEach((e, i) => assert.deepEqual(e.data[0].embedding, want[i % 3].embedding));
});

test('embeddings: without --embeddings the route is a 404 that says how to turn it on', async () => {
  const plain = await startServer(['-np', '1']);
  try {
    await assert.rejects(plain.client().embeddings.create({ model: 'x', input: 'hi' }),
      (e) => e instanceof OpenAI.NotFoundError && /--embeddings/.test(e.message));
  } finally {
    await plain.stop();
  }
});

test('embeddings: inputs and requests packed over --embeddings-seqs sequences equal one at a time', async () => {
  assert.match(srv.stderr(), /embeddings on, 4 at a time/);
  const single = await startServer(['-np', '1', '--embeddings', '--embeddings-seqs', '1']);
  try {
    assert.match(single.stderr(), /embeddings on, 1 at a time/);
    const one = single.client();
    // Short inputs, one word, and one of about 700 tokens (two pieces of 512 rows).
    const inputs = [...TEXTS, 'Once', ...TEXTS.map((t) => `${t} ${t}`), new Array(60).fill(TEXTS[0]).join(' ')];
    const want = (await one.embeddings.create({ model: 'x', input: inputs, encoding_format: 'float' })).data;
    assert.ok((await one.embeddings.create({ model: 'x', input: inputs.at(-1) })).usage.prompt_tokens > 512);
    const all = await client.embeddings.create({ model: 'x', input: inputs, encoding_format: 'float' });
    all.data.forEach((d, i) => assert.deepEqual(d.embedding, want[i].embedding, `input ${i}`));
    // Requests arriving together: their inputs share the waiting jobs' call.
    const many = await Promise.all(inputs.map((_, i) =>
      client.embeddings.create({ model: 'x', input: [inputs[i], inputs[(i + 1) % inputs.length]], encoding_format: 'float' })));
    many.forEach((r, i) => {
      assert.deepEqual(r.data[0].embedding, want[i].embedding, `request ${i}, input 0`);
      assert.deepEqual(r.data[1].embedding, want[(i + 1) % inputs.length].embedding, `request ${i}, input 1`);
    });
  } finally {
    await single.stop();
  }
  assert.throws(() => fish(['serve', '-m', STORIES, '--embeddings', '--embeddings-seqs', '0']), /--embeddings-seqs/);
});
