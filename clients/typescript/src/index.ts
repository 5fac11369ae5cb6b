// The package entry point: the agent layer (Mneme, typed errors, retries, pagers) and the
// generated SDK functions, types and fetch client under it.
export * from './generated';
export { createClient, createConfig, type Client } from './generated/client';
export * from './errors';
export { items, pages, type Page } from './pages';
export {
  DEFAULT_RETRY_POLICY,
  isRetryable,
  READS_ONLY_POSTS,
  retryAfterSeconds,
  retryingFetch,
  type RetryPolicy,
} from './retry';
export {
  connect,
  Mneme,
  type ConnectOptions,
  type TurnOptions,
  type WriteOptions,
} from './mneme';
export { VERSION } from './version';
