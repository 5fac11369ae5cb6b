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
  // Network failures (no response) pass through as they are, and so does a status below 400,
  // which is not a failure (see answeringNotModified).
  client.interceptors.error.use((error, response) =>
    response === undefined || response.status < 400 ? error : errorFromResponse(response, error),
  );
  return answeringNotModified(client);
}

const METHODS = [
  'connect',
  'delete',
  'get',
  'head',
  'options',
  'patch',
  'post',
  'put',
  'trace',
] as const;

type Send = (options: {
  responseStyle?: 'data' | 'fields';
  throwOnError?: boolean;
}) => Promise<unknown>;
type Fields = { data?: unknown; error?: unknown; request: Request; response?: Response };

/** `client` with a status below 400 outside 200-299 returned as an answer, never as an error.
 *
 * The generated client treats every status outside 200-299 as a failure, but a 304 Not Modified
 * is the answer to `If-None-Match` while the resource is unchanged: it comes back as
 * `{ data: undefined, error: undefined, response }` (with `responseStyle: 'data'`, undefined),
 * as the Python layer returns None for it. Each call is sent without throwing, so that its
 * response can be looked at, and a failure is then thrown as the call or the client asked. */
function answeringNotModified(client: Client): Client {
  const answering =
    (send: Send): Send =>
    async (options) => {
      const { responseStyle, throwOnError } = { ...client.getConfig(), ...options };
      const sent = send({ ...options, responseStyle: 'fields', throwOnError: false });
      const result = (await sent) as Fields;
      if (result.response !== undefined && result.response.status < 400) {
        const answer = { ...result, data: result.data, error: undefined };
        return responseStyle === 'data' ? answer.data : answer;
      }
      if (result.error !== undefined && throwOnError === true) throw result.error;
      return responseStyle === 'data' ? result.data : result;
    };
  const wrapped: Record<string, unknown> = {
    ...client,
    request: answering(client.request as unknown as Send),
  };
  for (const method of METHODS) wrapped[method] = answering(client[method] as unknown as Send);
  return wrapped as unknown as Client;
}

const newKey = (): string => crypto.randomUUID();

/** Options of the creating calls (`remember`, `thread`, `turn`). */
export interface WriteOptions {
  /** The `Idempotency-Key` to send (default: a fresh one). Sent again with the same key, a write
   * is applied once: the service replays its first answer. */
  idempotencyKey?: string;
}

export interface TurnOptions extends Omit<TurnContextOptions, 'query'>, WriteOptions {
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
 * `Idempotency-Key`, so they are safe too). The creating calls take an `idempotencyKey` of the
 * caller's: an application that sends one again after the layer gave up (with the key it was
 * first sent with) writes it once. */
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
  async remember(
    text: string,
    fields: Omit<MemoryCreate, 'text'> & WriteOptions = {},
  ): Promise<MemoryWritten> {
    const { idempotencyKey, ...body } = fields;
    const { data } = await createMemory({
      client: this.client,
      throwOnError: true,
      path: { user_id: this.userId },
      headers: { 'Idempotency-Key': idempotencyKey ?? newKey() },
      body: { ...body, text },
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
  async thread(
    title?: string,
    fields: Omit<ThreadCreate, 'title'> & WriteOptions = {},
  ): Promise<ThreadRead> {
    const { idempotencyKey, ...body } = fields;
    const { data } = await createThread({
      client: this.client,
      throwOnError: true,
      path: { user_id: this.userId },
      headers: { 'Idempotency-Key': idempotencyKey ?? newKey() },
      body: { ...body, title: title ?? null },
    });
    return data;
  }

  /** Record a turn and get the context for answering it, in one round trip: the assistant's
   * previous reply (if any), then the user's new message (then any further `messages`). */
  async turn(threadId: string, options: TurnOptions): Promise<TurnAppended> {
    const { user, assistant, messages = [], idempotencyKey, ...context } = options;
    const sent: MessageIn[] = [];
    if (assistant !== undefined) sent.push({ role: 'assistant', content: assistant });
    if (user !== undefined) sent.push({ role: 'user', content: user });
    sent.push(...messages);
    const { data } = await appendTurn({
      client: this.client,
      throwOnError: true,
      path: { user_id: this.userId, thread_id: threadId },
      headers: { 'Idempotency-Key': idempotencyKey ?? newKey() },
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
