// `Mneme`: the generated client behind a few typed calls an agent makes every turn.
import {
  appendTurn,
  buildContext,
  createMemory,
  createThread,
  listMemories,
  listMessages,
  listThreads,
  searchMemories,
  type ContextRequest,
  type ContextResponse,
  type ListMemoriesData,
  type MemoryCreate,
  type MemoryRead,
  type MemoryWritten,
  type MessageIn,
  type MessageRead,
  type SearchRequest,
  type SearchResponse,
  type ThreadCreate,
  type ThreadRead,
  type TurnAppended,
  type TurnContextOptions,
} from './generated';
import { createClient, createConfig, type Client } from './generated/client';
import { errorFromResponse } from './errors';
import { items } from './pages';
import { retryingFetch, type RetryPolicy } from './retry';

export interface ConnectOptions {
  baseUrl: string;
  /** A JWT or a Mneme API key. */
  token: string;
  retry?: Partial<RetryPolicy>;
  /** The `fetch` under the retries (default: the global one). */
  fetch?: typeof fetch;
}

/** A generated client whose requests retry what is safe to retry and whose problem answers
 * throw a `MnemeError` subclass; use it with any generated function. */
export function connect(options: ConnectOptions): Client {
  const client = createClient(
    createConfig({
      baseUrl: options.baseUrl,
      auth: options.token,
      fetch: retryingFetch(options.retry, options.fetch),
      throwOnError: true,
    }),
  );
  // Network failures (no response) pass through as they are.
  client.interceptors.error.use((error, response) =>
    response === undefined ? error : errorFromResponse(response, error),
  );
  return client;
}

const newKey = (): string => crypto.randomUUID();

export interface TurnOptions extends Omit<TurnContextOptions, 'query'> {
  /** The user's new message. */
  user?: string;
  /** The assistant's previous reply, appended before `user`. */
  assistant?: string;
  /** Further messages, appended after `user`. */
  messages?: MessageIn[];
  /** The query the returned context is built for (default: the last user message). */
  query?: string;
}

/** Mneme for one user (`me`, the token's own, by default). Every call throws a `MnemeError`
 * subclass on a problem answer and retries what is safe to retry (creations carry a fresh
 * `Idempotency-Key`, so they are safe too). */
export class Mneme {
  readonly client: Client;
  readonly userId: string;

  constructor(options: ConnectOptions & { userId?: string; client?: Client }) {
    this.client = options.client ?? connect(options);
    this.userId = options.userId ?? 'me';
  }

  /** The same connection, acting on another user of the tenant (service principals). */
  asUser(userId: string): Mneme {
    return new Mneme({ baseUrl: '', token: '', client: this.client, userId });
  }

  /** Store one memory. */
  async remember(text: string, fields: Omit<MemoryCreate, 'text'> = {}): Promise<MemoryWritten> {
    const { data } = await createMemory({
      client: this.client,
      throwOnError: true,
      path: { user_id: this.userId },
      headers: { 'Idempotency-Key': newKey() },
      body: { ...fields, text },
    });
    return data;
  }

  /** Search the user's memories. */
  async search(query: string, fields: Omit<SearchRequest, 'query'> = {}): Promise<SearchResponse> {
    const { data } = await searchMemories({
      client: this.client,
      throwOnError: true,
      path: { user_id: this.userId },
      body: { ...fields, query },
    });
    return data;
  }

  /** The memory block for the next model call (`.text` goes into the prompt). */
  async context(
    query: string,
    fields: Omit<ContextRequest, 'query'> = {},
  ): Promise<ContextResponse> {
    const { data } = await buildContext({
      client: this.client,
      throwOnError: true,
      path: { user_id: this.userId },
      body: { ...fields, query },
    });
    return data;
  }

  /** Start a conversation thread. */
  async thread(title?: string, fields: Omit<ThreadCreate, 'title'> = {}): Promise<ThreadRead> {
    const { data } = await createThread({
      client: this.client,
      throwOnError: true,
      path: { user_id: this.userId },
      headers: { 'Idempotency-Key': newKey() },
      body: { ...fields, title: title ?? null },
    });
    return data;
  }

  /** Record a turn and get the context for answering it, in one round trip: the assistant's
   * previous reply (if any), then the user's new message (then any further `messages`). */
  async turn(threadId: string, options: TurnOptions): Promise<TurnAppended> {
    const { user, assistant, messages = [], ...context } = options;
    const sent: MessageIn[] = [];
    if (assistant !== undefined) sent.push({ role: 'assistant', content: assistant });
    if (user !== undefined) sent.push({ role: 'user', content: user });
    sent.push(...messages);
    const { data } = await appendTurn({
      client: this.client,
      throwOnError: true,
      path: { user_id: this.userId, thread_id: threadId },
      headers: { 'Idempotency-Key': newKey() },
      body: { messages: sent, context },
    });
    return data;
  }

  /** Every memory matching `filters` (`listMemories`' query), page after page. */
  memories(
    filters: Omit<NonNullable<ListMemoriesData['query']>, 'cursor'> = {},
  ): AsyncGenerator<MemoryRead, void, undefined> {
    return items(async (cursor) => {
      const { data } = await listMemories({
        client: this.client,
        throwOnError: true,
        path: { user_id: this.userId },
        query: { ...filters, cursor },
      });
      return data;
    });
  }

  /** Every thread of the user, page after page. */
  threads(pageSize = 50): AsyncGenerator<ThreadRead, void, undefined> {
    return items(async (cursor) => {
      const { data } = await listThreads({
        client: this.client,
        throwOnError: true,
        path: { user_id: this.userId },
        query: { cursor, limit: pageSize },
      });
      return data;
    });
  }

  /** Every message of a thread, oldest first, page after page. */
  messages(threadId: string, pageSize = 50): AsyncGenerator<MessageRead, void, undefined> {
    return items(async (cursor) => {
      const { data } = await listMessages({
        client: this.client,
        throwOnError: true,
        path: { user_id: this.userId, thread_id: threadId },
        query: { cursor, limit: pageSize },
      });
      return data;
    });
  }
}
