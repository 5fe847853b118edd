// Runs the real Vercel AI SDK (streamText) for a batch of cases and reports what it saw.
//
//   node aisdk_probe.mjs <install dir>  < cases.json  > results.jsonl
//
// <install dir> is one of .cache/clients/aisdk{5,6,7} (scripts/install-clients); the SDK is
// loaded from there, so one probe file serves every generation. stdin is a JSON array of
// cases:
//
//   {"id": "...", "api": "responses" | "chat" | "compatible", "baseURL": "http://.../v1",
//    "tools": [{"name", "description", "parameters": <JSON schema>}], "timeoutMs": 20000,
//    "stream": true, "maxOutputTokens": 400, "prompt": "Do the task."}
//
// "model" (default "test-model"), "apiKey" (default "test-key") and "headers" (sent
// with every request; a gateway's routing headers) say whom the case asks for what.
// "stream": false runs generateText (a non-streamed request) instead of streamText.
// "prompt" (default "Do the task.") is the user message (the full-chain tests put the
// fake Devin's markers there); the result's `usage` is the SDK's unified usage.
//
// "compatible" is chat completions through @ai-sdk/openai-compatible (what opencode uses
// for a custom OpenAI-compatible provider such as a CLIProxyAPI endpoint); "anthropic" is
// /v1/messages through @ai-sdk/anthropic, "google" :streamGenerateContent through
// @ai-sdk/google (baseURL then ends in /v1beta); both only where installed (aisdk7).
//
// One JSON line per case, in completion order: the installed versions, finishReason, the
// tool calls as the `ai` core reports them (toolName, input, invalid), the stream part
// types seen, `error` parts, `tool-error` parts, and anything thrown. Tools have no
// `execute`, so streamText stops after one step: exactly one request per case.
// Cases run concurrently (all I/O); each is bounded by its own abort timeout.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node aisdk_probe.mjs <install dir> < cases.json');
  process.exit(2);
}
const requireFrom = createRequire(dir.replace(/\/$/, '') + '/package.json');
const load = async name => import(pathToFileURL(requireFrom.resolve(name)).href);
const versionOf = name => {
  try { return requireFrom(name + '/package.json').version; } catch { return null; }
};

const ai = await load('ai');
const { createOpenAI } = await load('@ai-sdk/openai');
const optional = async name => (versionOf(name) ? load(name) : null);
const compatible = await optional('@ai-sdk/openai-compatible');
const anthropic = await optional('@ai-sdk/anthropic');
const google = await optional('@ai-sdk/google');
const versions = Object.fromEntries(
  ['ai', '@ai-sdk/openai', '@ai-sdk/openai-compatible', '@ai-sdk/anthropic', '@ai-sdk/google']
    .map(n => [n, versionOf(n)]).filter(([, v]) => v));

const short = (e, n = 300) => String(e?.message ?? e).slice(0, n);
const NEVER = 'never settles';
const settled = (promise, ms = 3000) => {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(NEVER)), ms); });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
};

function need(mod, name) {
  if (!mod) throw new Error(name + ' is not installed in ' + dir);
  return mod;
}

function modelFor(c) {
  const model = c.model ?? 'test-model';
  const auth = { baseURL: c.baseURL, apiKey: c.apiKey ?? 'test-key', ...(c.headers ? { headers: c.headers } : {}) };
  if (c.api === 'anthropic') {
    return need(anthropic, '@ai-sdk/anthropic').createAnthropic(auth)(model);
  }
  if (c.api === 'google') {
    return need(google, '@ai-sdk/google').createGoogleGenerativeAI(auth)(model);
  }
  if (c.api === 'compatible') {
    if (!compatible) throw new Error('@ai-sdk/openai-compatible is not installed in ' + dir);
    const p = compatible.createOpenAICompatible({ name: 'streamfix', includeUsage: true, ...auth });
    return p.chatModel ? p.chatModel(model) : p(model);
  }
  const openai = createOpenAI(auth);
  return c.api === 'chat' ? openai.chat(model) : openai.responses(model);
}

async function runCase(c) {
  const started = Date.now();
  const out = { id: c.id, api: c.api, versions, errors: [], toolErrors: [], parts: [] };
  const tools = {};
  for (const t of c.tools ?? []) {
    tools[t.name] = ai.tool({
      description: t.description ?? t.name,
      inputSchema: ai.jsonSchema(t.parameters ?? { type: 'object' }),
    });
  }
  const seen = new Set();
  const options = {
    model: modelFor(c), prompt: c.prompt ?? 'Do the task.', tools, maxRetries: 0,
    abortSignal: AbortSignal.timeout(c.timeoutMs ?? 20000),
    ...(c.maxOutputTokens ? { maxOutputTokens: c.maxOutputTokens } : {}),
  };
  if (c.stream === false) return generate(c, out, options, started);
  let result;
  try {
    result = ai.streamText({
      ...options,
      onError: () => {},  // error parts are read from fullStream below
    });
    for await (const part of result.fullStream) {
      seen.add(part.type);
      if (part.type === 'error') out.errors.push(short(part.error));
      if (part.type === 'tool-error') out.toolErrors.push(short(part.error, 200));
    }
  } catch (e) {
    out.thrown = short(e);
  }
  out.parts = [...seen];
  if (result) {
    // each promise on its own: one rejecting must not hide the others. Once the stream
    // is over they settle at once, unless the SDK lost track (AI SDK 5 after a throw).
    const [finish, calls, text, usage] = await Promise.allSettled(
      [result.finishReason, result.toolCalls, result.text, result.usage].map(p => settled(p)));
    if (usage.status === 'fulfilled') out.usage = usage.value;
    if (finish.status === 'fulfilled') out.finishReason = finish.value; else out.finishError = short(finish.reason);
    if (calls.status === 'fulfilled') {
      out.toolCalls = calls.value.map(t => ({
        toolName: t.toolName, toolCallId: t.toolCallId, input: t.input, invalid: t.invalid === true,
      }));
    } else out.toolCallsError = short(calls.reason);
    if (text.status === 'fulfilled') out.text = text.value;
  }
  out.elapsedMs = Date.now() - started;
  return out;
}

// A stream that never settles (the SDK waiting forever for a part that never comes) has
// no pending I/O once the socket closed; node would then exit (code 13) and lose the
// whole batch. A referenced timer per case keeps the loop alive and reports a hang.
const hang = (c, ms) => new Promise(resolve => setTimeout(
  () => resolve({ id: c.id, versions, hung: true, thrown: `hangs: no result after ${ms} ms` }), ms));

async function generate(c, out, options, started) {
  try {
    const r = await ai.generateText(options);
    out.finishReason = r.finishReason;
    out.toolCalls = r.toolCalls.map(t => ({
      toolName: t.toolName, toolCallId: t.toolCallId, input: t.input, invalid: t.invalid === true,
    }));
    out.toolErrors = r.content.filter(p => p.type === 'tool-error').map(p => short(p.error, 200));
    out.text = r.text;
    out.usage = r.usage;
  } catch (e) {
    out.thrown = short(e);
  }
  out.elapsedMs = Date.now() - started;
  return out;
}

const cases = JSON.parse(readFileSync(0, 'utf8'));
await Promise.all(cases.map(async c => {
  let r;
  const limit = (c.timeoutMs ?? 20000) + 2000;
  try {
    r = await Promise.race([runCase(c), hang(c, limit)]);
  } catch (e) {
    r = { id: c.id, versions, thrown: 'probe: ' + short(e) };
  }
  process.stdout.write(JSON.stringify(r) + '\n');
}));
process.exit(0);  // the losing hang timers must not hold the process
