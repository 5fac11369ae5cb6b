// The generated client, unmodified, through an agent's loop against a live Mneme server.
// Run by tests/clients/test_typescript_client.py, which starts the server and passes
// MNEME_BASE_URL, MNEME_TOKEN and MNEME_USER_ID.
import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import {
  appendTurn,
  buildContext,
  createClient,
  createConfig,
  createMemory,
  createThread,
  exportUser,
  getProfile,
  patchProfile,
  searchMemories,
} from '../src';

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set`);
  return value;
}

const client = createClient(
  createConfig({ baseUrl: env('MNEME_BASE_URL'), auth: env('MNEME_TOKEN') }),
);
const user_id = env('MNEME_USER_ID');

test('an agent loop runs end to end through the generated client', async () => {
  const { data: written } = await createMemory({
    client,
    throwOnError: true,
    path: { user_id },
    body: { text: 'Prefers window seats on long flights.', category: 'preference' },
  });
  assert.equal(written.duplicate, false);

  const { data: found } = await searchMemories({
    client,
    throwOnError: true,
    path: { user_id },
    body: { query: 'window seat', kinds: ['semantic'] },
  });
  assert.ok(found.hits.some((hit) => hit.memory.id === written.id));

  await patchProfile({
    client,
    throwOnError: true,
    path: { user_id },
    body: [{ op: 'add', path: '/city', value: 'Lisbon' }],
  });
  // The other accepted media type, sent through the same generated function.
  await patchProfile({
    client,
    throwOnError: true,
    path: { user_id },
    body: [{ op: 'add', path: '/language', value: 'pt' }],
    headers: { 'Content-Type': 'application/json' },
  });
  const { data: profile } = await getProfile({ client, throwOnError: true, path: { user_id } });
  assert.equal(profile.profile.city, 'Lisbon');
  assert.equal(profile.profile.language, 'pt');

  const { data: thread } = await createThread({
    client,
    throwOnError: true,
    path: { user_id },
    body: { title: 'Trip planning' },
  });
  const { data: turn } = await appendTurn({
    client,
    throwOnError: true,
    path: { user_id, thread_id: thread.id },
    body: {
      messages: [{ role: 'user', content: 'Book me a seat to Lisbon, window if possible.' }],
      context: { budget_tokens: 400 },
    },
  });
  assert.equal(turn.items.length, 1);
  assert.match(turn.context.text ?? '', /window seats/, 'the turn returns the next context');

  const { data: context } = await buildContext({
    client,
    throwOnError: true,
    path: { user_id },
    body: { query: 'seat preference', thread_id: thread.id },
  });
  assert.ok(context.token_count > 0);

  const exported = await exportUser({ client, throwOnError: true, path: { user_id }, parseAs: 'text' });
  const records = String(exported.data).trim().split('\n').map((line) => JSON.parse(line));
  assert.ok(records.some((record) => JSON.stringify(record).includes(written.id)));
});
