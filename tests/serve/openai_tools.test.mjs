// fish serve's tool calls through the official OpenAI client: stories260K
// chatting with the real Qwen2.5 template (--chat-template, read in place from
// the shared folder), whose Hermes <tool_call> format fish parses. The tiny
// model writes nonsense, so a call only comes out when tool_choice forces
// one ("required" or a named function): then the reply is held to the tools'
// schemas, and the call must parse, name a tool and match its parameters,
// whole or streamed (the client's streaming helpers accumulate it), and a
// conversation carrying the call and its result renders as the template says.
// The Llama 3.1, Mistral Nemo, Granite 3.3 and Qwen3 templates force theirs too.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, fish, collect, MODELS } from './serve_util.mjs';

const QWEN = `${MODELS}/templates/Qwen-Qwen2.5-7B-Instruct.jinja`;

let srv;
let client;

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const clock = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: { type: 'object', properties: { utc: { type: 'boolean' } }, required: ['utc'] },
  },
};
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];
// stories260K pads with runs of whitespace between tokens: room for that.
const base = { model: 'x', messages: ask, tools: [weather, clock], max_tokens: 1500, temperature: 0 };

function checkWeather(call) {
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(Object.keys(args).sort(), ['city', 'unit'], call.function.arguments);
  assert.equal(typeof args.city, 'string');
  assert.ok([...args.city].length <= 8, call.function.arguments);
  assert.ok(['celsius', 'fahrenheit'].includes(args.unit), call.function.arguments);
  return args;
}

before(async () => {
  srv = await startServer(['-np', '2', '--chat-template', QWEN]);
  client = srv.client();
  assert.match(srv.stderr(), /tool calls: hermes/);
});
after(async () => srv.stop());

test('tool_choice required and named: a parsed call whose arguments follow the schema', async () => {
  for (const temperature of [0, 1]) {
    const r = await client.chat.completions.create({ ...base, temperature, seed: 5, tool_choice: 'required' });
    const ch = r.choices[0];
    assert.equal(ch.finish_reason, 'tool_calls', JSON.stringify(ch));
    assert.equal(ch.message.content, null);
    assert.equal(ch.message.tool_calls.length, 1);
    const call = ch.message.tool_calls[0];
    assert.ok(['get_weather', 'get_time'].includes(call.function.name));
    if (call.function.name === 'get_weather') checkWeather(call);
    else assert.equal(typeof JSON.parse(call.function.arguments).utc, 'boolean');
  }
  for (const [tool, check] of [
    [weather, checkWeather],
    [clock, (c) => assert.equal(typeof JSON.parse(c.function.arguments).utc, 'boolean', c.function.arguments)],
  ]) {
    const r = await client.chat.completions.create({
      ...base, tool_choice: { type: 'function', function: { name: tool.function.name } },
    });
    const call = r.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, tool.function.name);
    check(call);
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
  }
});

test('streamed: delta.tool_calls chunks (id, type, name, then the arguments), and the client helpers accept them', async () => {
  const named = { type: 'function', function: { name: 'get_weather' } };
  const stream = await client.chat.completions.create({ ...base, stream: true, tool_choice: named });
  const { text, finish, chunks } = await collect(stream, true);
  assert.equal(text, '');
  assert.equal(finish, 'tool_calls');
  const deltas = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []));
  assert.ok(deltas.length >= 2, JSON.stringify(deltas));
  assert.equal(deltas[0].index, 0);
  assert.match(deltas[0].id, /^call_/);
  assert.equal(deltas[0].type, 'function');
  assert.equal(deltas[0].function.name, 'get_weather');
  const args = deltas.map((d) => d.function?.arguments ?? '').join('');
  checkWeather({ id: deltas[0].id, type: 'function', function: { name: 'get_weather', arguments: args } });

  // The streaming helper: its events, and the final completion it assembles.
  const strict = { ...weather, function: { ...weather.function, strict: true } };
  const runner = client.chat.completions.stream({ ...base, tools: [strict, clock], tool_choice: named });
  const done = [];
  runner.on('tool_calls.function.arguments.done', (e) => done.push(e));
  const final = await runner.finalChatCompletion();
  const call = final.choices[0].message.tool_calls[0];
  checkWeather(call);
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(done.length, 1);
  assert.equal(done[0].name, 'get_weather');
  assert.deepEqual(done[0].parsed_arguments, JSON.parse(call.function.arguments));  // strict: parsed by the client
});

test('round trip: the call and a tool message go back, rendered as the template expects (arguments as an object)', async () => {
  const call = { id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris", "unit": "celsius"}' } };
  const messages = [...ask, { role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: 'call_abc', content: '{"temp": 20}' }];
  const r = await client.chat.completions.create({ ...base, messages, max_tokens: 1 });
  // The prompt the server evaluated is the template's rendering with the arguments as an object.
  const input = {
    messages: [...ask, { role: 'assistant', content: '', tool_calls: [{ ...call, function: { name: 'get_weather', arguments: { city: 'Paris', unit: 'celsius' } } }] },
      messages[2]],
    tools: [weather, clock], add_generation_prompt: true,
  };
  const prompt = fish(['template', QWEN, '--json', '-'], JSON.stringify(input));
  assert.ok(prompt.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'));
  assert.ok(prompt.includes('<tool_response>\n{"temp": 20}\n</tool_response>'));
  const tok = await (await fetch(`${srv.url}/tokenize`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ content: prompt }),
  })).json();
  assert.equal(r.usage.prompt_tokens, tok.tokens.length);

  // The official runner: it calls the function, sends the result back, and asks again.
  for (const stream of [false, true]) {
    const seen = [];
    const tools = [{ type: 'function', function: { ...weather.function, function: (a) => { seen.push(a); return { temp: 20 }; }, parse: JSON.parse } }];
    const opts = { ...base, messages: ask, tools, tool_choice: 'required', stream };
    const runner = client.chat.completions.runTools(opts, { maxChatCompletions: 2 });
    await runner.done();
    const msgs = runner.messages;
    assert.equal(seen.length, 2, JSON.stringify(msgs));
    for (const a of seen) checkWeather({ id: 'call_' + 'x'.repeat(24), type: 'function', function: { name: 'get_weather', arguments: JSON.stringify(a) } });
    assert.deepEqual(msgs.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant', 'tool']);
    assert.equal(msgs[2].tool_call_id, msgs[1].tool_calls[0].id);
  }
});

test('tool_choice auto and none: the tiny model writes text, which stays content', async () => {
  for (const tool_choice of ['auto', 'none', undefined]) {
    const r = await client.chat.completions.create({ ...base, tool_choice, max_tokens: 24 });
    const m = r.choices[0].message;
    assert.equal(typeof m.content, 'string');
    assert.equal(m.tool_calls, undefined);
    assert.notEqual(r.choices[0].finish_reason, 'tool_calls');
  }
  // "none" leaves the tools out of the prompt.
  const none = await client.chat.completions.create({ ...base, tool_choice: 'none', max_tokens: 1 });
  const auto = await client.chat.completions.create({ ...base, tool_choice: 'auto', max_tokens: 1 });
  assert.ok(none.usage.prompt_tokens < auto.usage.prompt_tokens);
});

test('bad tool requests are 400s naming the field', async () => {
  const bad = async (req, param, re) =>
    assert.rejects(client.chat.completions.create({ ...base, ...req }),
      (e) => e.status === 400 && e.param === param && re.test(e.message));
  await bad({ tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice', /'nope', which is not one of 'tools'/);
  await bad({ tools: [{ type: 'function', function: { description: 'no name' } }] }, 'tools', /tools\[0\]\.function\.name/);
  const zip = { type: 'function', function: { name: 'zip', parameters: { type: 'object', properties: { code: { type: 'string', pattern: '^[0-9]+$' } } } } };
  await bad({ tools: [weather, zip], tool_choice: 'required' }, 'tools', /'tools\[1\]\.function\.parameters': keyword 'pattern' at \/properties\/code\/pattern/);
  await bad({ tools: [zip], tool_choice: 'required', response_format: { type: 'json_object' } }, 'tool_choice', /response_format/);
  // Only a forced call holds the arguments to the schema: "auto" passes it to the template.
  const r = await client.chat.completions.create({ ...base, tools: [weather, zip], max_tokens: 2 });
  assert.equal(r.choices[0].message.tool_calls, undefined);
});

test('a template with no tool-call format: forcing a call is a 400, auto is plain text', async () => {
  const plain = await startServer(['--fallback']);
  try {
    assert.match(plain.stderr(), /tool calls: none/);
    const c = plain.client();
    await assert.rejects(c.chat.completions.create({ ...base, tool_choice: 'required' }),
      (e) => e.status === 400 && e.param === 'tool_choice' && /no tool-call format/.test(e.message));
    const r = await c.chat.completions.create({ ...base, max_tokens: 8 });
    assert.equal(r.choices[0].message.tool_calls, undefined);
  } finally {
    await plain.stop();
  }
});

test('every family forces a call in its own format: Llama 3.1, Mistral Nemo, Granite 3.3, Qwen3', async () => {
  for (const [file, family] of [
    ['meta-llama-Llama-3.1-8B-Instruct.jinja', 'llama3'],
    ['mistralai-Mistral-Nemo-Instruct-2407.jinja', 'mistral'],
    ['ibm-granite-granite-3.3-2B-Instruct.jinja', 'granite'],
    ['Qwen-Qwen3-0.6B.jinja', 'hermes'],
  ]) {
    const s = await startServer(['--chat-template', `${MODELS}/templates/${file}`]);
    try {
      assert.match(s.stderr(), new RegExp(`tool calls: ${family}\\n`));
      const c = s.client();
      const req = { ...base, tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false };
      const r = await c.chat.completions.create(req);
      assert.equal(r.choices[0].finish_reason, 'tool_calls', `${file}: ${JSON.stringify(r.choices[0])}`);
      assert.equal(r.choices[0].message.tool_calls.length, 1);
      checkWeather(r.choices[0].message.tool_calls[0]);
      const final = await c.chat.completions.stream(req).finalChatCompletion();
      assert.equal(final.choices[0].message.tool_calls.length, 1, file);
      checkWeather(final.choices[0].message.tool_calls[0]);
    } finally {
      await s.stop();
    }
  }
});
