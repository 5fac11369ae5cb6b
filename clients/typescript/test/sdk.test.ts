// The agent layer (Mneme, typed errors, pagers) against a live Mneme server, and its retries
// against scripted answers (a live server cannot be made to answer 429 or 503 on cue).
// Run by tests/clients/test_typescript_client.py, which starts the server and passes
// MNEME_BASE_URL, MNEME_TOKEN and MNEME_USER_ID.
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import {
  connect,
  deleteMemory,
  getMemory,
  Mneme,
  MnemeError,
  NotFound,
  RateLimited,
  READS_ONLY_POSTS,
  retryingFetch,
  updateMemory,
  ValidationFailed,
} from '../src';

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set`);
  return value;
}

// The user is shared with agent_loop.test.ts, which node may run at the same time: each test
// looks only at what it wrote.
const base = new Mneme({ baseUrl: env('MNEME_BASE_URL'), token: env('MNEME_TOKEN') });

test('the three-line agent loop remembers and returns context', async () => {
  const mneme = base;
  const written = await mneme.remember('Likes window seats on night trains.', {
    category: 'preference',
    metadata: { source: 'onboarding', tags: ['travel'] },
  });
  const block = await mneme.context('Which seat should I book on the train?');
  const thread = await mneme.thread('Trip planning');
  const turn = await mneme.turn(thread.id, {
    user: 'Book me a night train seat to Lisbon.',
    assistant: 'Hello! Where to?',
    budget_tokens: 400,
  });

  assert.match(block.text ?? '', /night trains/);
  assert.match(turn.context.text ?? '', /night trains/);
  assert.deepEqual(
    turn.items.map((item) => [item.role, item.content]),
    [
      ['assistant', 'Hello! Where to?'],
      ['user', 'Book me a night train seat to Lisbon.'],
    ],
  );
  const { data: stored } = await getMemory({
    client: mneme.client,
    throwOnError: true,
    path: { user_id: 'me', memory_id: written.id },
  });
  assert.deepEqual(stored.metadata, { source: 'onboarding', tags: ['travel'] });
});

test('problems throw typed errors with their code', async () => {
  const mneme = base;
  const refused = await mneme
    .remember('Renew the passport.', { expires_at: '2000-01-01T00:00:00Z' })
    .catch((error: unknown) => error);
  assert.ok(refused instanceof ValidationFailed && refused instanceof MnemeError);
  assert.equal(refused.status, 422);
  assert.equal(refused.code, 'VALIDATION_FAILED');
  assert.deepEqual(
    (refused.problem.errors as { loc: unknown[] }[]).map((error) => error.loc),
    [['body', 'expires_at']],
  );

  // A generated function on the layer's client throws the same way.
  const missing = await updateMemory({
    client: mneme.client,
    throwOnError: true,
    path: { user_id: 'me', memory_id: crypto.randomUUID() },
    body: { text: 'nothing here' },
  }).catch((error: unknown) => error);
  assert.ok(missing instanceof NotFound);
  assert.equal(missing.code, 'NOT_FOUND');
});

test('a 304 Not Modified is an answer, not an error', async () => {
  const written = await base.remember('Reads the news at breakfast.');
  const path = { user_id: 'me', memory_id: written.id };
  const { response: read } = await getMemory({ client: base.client, path });
  const headers = { 'if-none-match': read.headers.get('etag') ?? '' };
  const client = connect({ baseUrl: env('MNEME_BASE_URL'), token: env('MNEME_TOKEN') });

  for (const throwOnError of [undefined, true, false]) {
    const unchanged = await getMemory({ client, path, headers, throwOnError });
    assert.equal(unchanged.response.status, 304);
    assert.equal(unchanged.data, undefined);
    assert.equal((unchanged as { error?: unknown }).error, undefined);
  }
  const dataOnly = await getMemory({ client, path, headers, responseStyle: 'data' });
  assert.equal(dataOnly, undefined);
  // A failure still throws, through the same client.
  const missing = await getMemory({ client, path: { ...path, memory_id: crypto.randomUUID() } })
    .catch((error: unknown) => error);
  assert.ok(missing instanceof NotFound);
});

test('pagers follow next_cursor to the last page', async () => {
  const mneme = base;
  const texts = [0, 1, 2, 3, 4].map((n) => `Visited city number ${n} in ${2000 + n}.`);
  for (const text of texts) await mneme.remember(text, { kind: 'episodic', category: 'travel-log' });
  const listed: string[] = [];
  for await (const memory of mneme.memories({ limit: 2, category: ['travel-log'] })) {
    listed.push(memory.text);
  }
  const thread = await mneme.thread();
  for (const n of [0, 1, 2]) await mneme.turn(thread.id, { user: `Question ${n}?` });
  const messages: string[] = [];
  for await (const message of mneme.messages(thread.id, 2)) messages.push(message.content);
  const threads: string[] = [];
  for await (const listedThread of mneme.threads(1)) threads.push(listedThread.id);

  assert.deepEqual(listed.sort(), [...texts].sort());
  assert.deepEqual(messages, ['Question 0?', 'Question 1?', 'Question 2?']);
  assert.ok(threads.includes(thread.id));
  assert.equal(new Set(threads).size, threads.length, 'no thread listed twice');
});

/** A fetch that delivers the first request to the server, then drops its answer as a network
 * failure; `deliveries()` counts the requests that reached the server. */
function losingTheFirstAnswer(): { fetch: typeof fetch; deliveries: () => number } {
  let deliveries = 0;
  const losesFirstAnswer = async (
    input: RequestInfo | URL,
    init?: RequestInit,
  ): Promise<Response> => {
    const response = await fetch(input, init);
    deliveries += 1;
    if (deliveries > 1) return response;
    await response.body?.cancel();
    throw new TypeError('fetch failed');
  };
  return { fetch: losesFirstAnswer as typeof fetch, deliveries: () => deliveries };
}

test('a creation retried after a lost answer is stored once', async () => {
  const lossy = losingTheFirstAnswer();
  const mneme = new Mneme({
    baseUrl: env('MNEME_BASE_URL'),
    token: env('MNEME_TOKEN'),
    fetch: lossy.fetch,
  });
  const written = await mneme.remember('Allergic to hazelnuts.', { category: 'allergies' });
  const listed: string[] = [];
  for await (const memory of mneme.memories({ category: ['allergies'] })) listed.push(memory.id);

  assert.equal(lossy.deliveries(), 3); // the lost answer, its retry, the listing
  assert.deepEqual(listed, [written.id]);
});

test("a creation sent again with the caller's Idempotency-Key is written once", async () => {
  const mneme = new Mneme({ baseUrl: env('MNEME_BASE_URL'), token: env('MNEME_TOKEN') });
  const key = crypto.randomUUID();
  const memories = [];
  const threads = [];
  const turns = [];
  for (const _ of [1, 2]) {
    memories.push(await mneme.remember('Owns a red bike.', { idempotencyKey: `m-${key}` }));
  }
  for (const _ of [1, 2]) {
    threads.push(await mneme.thread('Bikes', { idempotencyKey: `t-${key}` }));
  }
  for (const _ of [1, 2]) {
    const options = { user: 'Which bike?', idempotencyKey: `turn-${key}` };
    turns.push(await mneme.turn(threads[0].id, options));
  }
  const messages: string[] = [];
  for await (const message of mneme.messages(threads[0].id)) messages.push(message.content);

  assert.equal(memories[0].id, memories[1].id);
  assert.equal(threads[0].id, threads[1].id);
  assert.deepEqual(turns[0].items.map((item) => item.id), turns[1].items.map((item) => item.id));
  assert.deepEqual(messages, ['Which bike?']);
});

test('a delete retried after a lost answer succeeds', async () => {
  const written = await base.remember('Has a dog named Biscuit.');
  const path = { user_id: 'me', memory_id: written.id };
  const lossy = losingTheFirstAnswer();
  const client = connect({
    baseUrl: env('MNEME_BASE_URL'),
    token: env('MNEME_TOKEN'),
    fetch: lossy.fetch,
  });
  // The first attempt deletes it and its answer is lost; the retry finds nothing.
  const { response } = await deleteMemory({ client, path });
  assert.equal(response.status, 204);
  assert.equal(lossy.deliveries(), 2);
  const gone = await getMemory({ client: base.client, path }).catch((error: unknown) => error);
  assert.ok(gone instanceof NotFound);
  // A delete whose own answer is the 404 is still refused: nothing was there.
  const missing = await deleteMemory({ client: base.client, path }).catch(
    (error: unknown) => error,
  );
  assert.ok(missing instanceof NotFound);
});

function scripted(answers: (Response | Error)[]): { fetch: typeof fetch; seen: string[] } {
  const seen: string[] = [];
  const fetchImpl = async (input: RequestInfo | URL): Promise<Response> => {
    const request = input as Request;
    seen.push(`${request.method} ${await request.text()}`);
    const answer = answers.shift();
    if (answer === undefined) throw new Error('no answer left');
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { fetch: fetchImpl as typeof fetch, seen };
}

test('idempotent and keyed requests wait as long as Retry-After and RateLimit say', async () => {
  const waits: number[] = [];
  const wait = async (seconds: number): Promise<void> => {
    waits.push(seconds);
  };
  const { fetch: answers, seen } = scripted([
    new Response(null, { status: 429, headers: { 'Retry-After': '2' } }),
    new Response(null, { status: 503, headers: { RateLimit: '"default";r=0;t=3, "burst";r=4;t=1' } }),
    new Response('{}', { status: 201 }),
  ]);
  const keyed = await retryingFetch({}, answers, wait)('http://mneme/v1/users/me/memories', {
    method: 'POST',
    headers: { 'Idempotency-Key': 'k-1' },
    body: '{"text":"x"}',
  });
  assert.equal(keyed.status, 201);
  assert.deepEqual(waits, [2, 3]);
  // Each attempt sends the whole body again.
  assert.deepEqual(seen, Array(3).fill('POST {"text":"x"}'));
});

test('a POST without a key, and a wait longer than maxDelay, are left to the caller', async () => {
  const waits: number[] = [];
  const wait = async (seconds: number): Promise<void> => {
    waits.push(seconds);
  };
  const unkeyed = scripted([new Response(null, { status: 503 }), new Response('{}', { status: 201 })]);
  const post = await retryingFetch({}, unkeyed.fetch, wait)('http://mneme/x', { method: 'POST', body: '{}' });
  assert.equal(post.status, 503);
  assert.equal(unkeyed.seen.length, 1);

  const problem = { status: 429, code: 'RATE_LIMITED', title: 'Too Many Requests', detail: 'slow down' };
  const tooLong = scripted([
    new Response(JSON.stringify(problem), { status: 429, headers: { 'Retry-After': '120' } }),
  ]);
  const limited = new Mneme({
    baseUrl: 'http://mneme',
    token: 't',
    fetch: tooLong.fetch,
    retry: { maxDelay: 30 },
  });
  const error = await limited.remember('x').catch((caught: unknown) => caught);
  assert.ok(error instanceof RateLimited);
  assert.equal(error.retryAfter, 120);
  assert.equal(tooLong.seen.length, 1);
  assert.deepEqual(waits, []);

  const network = scripted([new TypeError('fetch failed'), new Response('{}', { status: 200 })]);
  const get = await retryingFetch({}, network.fetch, wait)('http://mneme/readyz');
  assert.equal(get.status, 200);
  assert.equal(waits.length, 1);
});

test('a status no error class stands for throws a MnemeError, not a ValidationFailed', async () => {
  const problem = (status: number, code: string): Response =>
    new Response(JSON.stringify({ status, code, title: code, detail: code }), {
      status,
      headers: { 'Content-Type': 'application/problem+json' },
    });
  const answers = scripted([
    problem(405, 'METHOD_NOT_ALLOWED'),
    problem(408, 'REQUEST_TIMEOUT'),
    problem(415, 'UNSUPPORTED_MEDIA_TYPE'),
    problem(422, 'VALIDATION_FAILED'),
  ]);
  const mneme = new Mneme({ baseUrl: 'http://mneme', token: 't', fetch: answers.fetch });
  const classes: [string, number, string][] = [];
  for (let n = 0; n < 4; n += 1) {
    const error = await mneme.remember('x').catch((caught: unknown) => caught);
    assert.ok(error instanceof MnemeError);
    classes.push([error.constructor.name, error.status, error.code]);
  }
  assert.deepEqual(classes, [
    ['MnemeError', 405, 'METHOD_NOT_ALLOWED'],
    ['MnemeError', 408, 'REQUEST_TIMEOUT'],
    ['ValidationFailed', 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['ValidationFailed', 422, 'VALIDATION_FAILED'],
  ]);
});

test('a DELETE answered 404 after an attempt that may have applied it is done', async () => {
  const wait = async (): Promise<void> => {};
  const cases: [Response | Error, number][] = [
    [new TypeError('fetch failed'), 204],
    [new Response(null, { status: 504 }), 204],
    [new Response(null, { status: 502 }), 204],
    [new Response(null, { status: 503 }), 404],
    [new Response(null, { status: 429 }), 404],
  ];
  for (const [first, answered] of cases) {
    const answers = scripted([first, new Response(null, { status: 404 })]);
    const send = retryingFetch({}, answers.fetch, wait);
    const answer = await send('http://mneme/v1/users/me/memories/x', { method: 'DELETE' });
    assert.equal(answer.status, answered, String(first));
    assert.equal(answers.seen.length, 2);
  }
  // Only a DELETE: a read's 404 after a lost answer is a 404.
  const read = scripted([new TypeError('fetch failed'), new Response(null, { status: 404 })]);
  const answer = await retryingFetch({}, read.fetch, wait)('http://mneme/v1/users/me/memories/x');
  assert.equal(answer.status, 404);
});

test('a search and a context block are retried like a GET: they only read', async () => {
  const waits: number[] = [];
  const wait = async (seconds: number): Promise<void> => {
    waits.push(seconds);
  };
  const busy = { status: 503, code: 'SERVICE_BUSY', title: 'Service busy', detail: 'retry' };
  for (const path of ['/v1/users/me/memories/search', '/prefix/v1/users/ada/context']) {
    const answers = scripted([
      new Response(JSON.stringify(busy), { status: 503, headers: { 'Retry-After': '2' } }),
      new Response('{}', { status: 200 }),
    ]);
    const answer = await retryingFetch({}, answers.fetch, wait)(`http://mneme${path}`, {
      method: 'POST',
      body: '{"query":"x"}',
    });
    assert.equal(answer.status, 200);
    assert.equal(answers.seen.length, 2);
  }
  assert.deepEqual(waits, [2, 2]);
});

test('the POST operations retried without a key are the ones the service marks reads-only', () => {
  // Run from clients/typescript (npm test): the document is the service's, in docs/.
  const document = JSON.parse(readFileSync('../../docs/openapi.json', 'utf8')) as {
    paths: Record<string, Record<string, Record<string, unknown>>>;
  };
  for (const [path, operations] of Object.entries(document.paths)) {
    const post = operations.post;
    if (post === undefined) continue;
    const concrete = path.replace(/\{[^}]+\}/g, 'x');
    assert.equal(READS_ONLY_POSTS.test(concrete), post['x-mneme-reads-only'] === true, path);
  }
});
