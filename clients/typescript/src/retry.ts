// Retries with back-off for requests that are safe to send twice: the idempotent methods (GET,
// HEAD, OPTIONS, PUT, DELETE), any request carrying an `Idempotency-Key` (the service replays
// the first answer to a repeat), and the POST operations that only read (a search, a context
// block: `x-mneme-reads-only` in the OpenAPI document). They are retried on 429, 502, 503 and 504 and on network
// failures, after the wait the service asked for (`Retry-After`, else the `RateLimit` field's `t`
// of an exhausted policy), else after an exponential back-off with full jitter. A wait longer
// than `maxDelay` is not waited for: the answer goes back to the caller, whose error carries
// `retryAfter`.
//
// A DELETE is idempotent in what it leaves behind, not in its answer: repeated after the first
// attempt's answer was lost, it finds nothing and answers 404. So a retried DELETE answered 404
// after an attempt that may have been applied (it got no answer, or a gateway's 502 or 504) is
// done: the caller gets a 204 No Content in place of the 404, the resource being gone either way.

export interface RetryPolicy {
  /** Tries in all, the first included; 1 never retries. */
  attempts: number;
  /** Seconds of the first back-off, doubled at each retry. */
  backoff: number;
  /** The longest wait, in seconds. */
  maxDelay: number;
  statuses: readonly number[];
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  attempts: 4,
  backoff: 0.5,
  maxDelay: 30,
  statuses: [429, 502, 503, 504],
};

const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** The paths of the POST operations the service marks `x-mneme-reads-only` (after any prefix
 * the base URL adds). */
export const READS_ONLY_POSTS = /\/v1\/users\/[^/]+\/(?:memories\/search|context)$/;

/** The wait a response asks for, in seconds: `Retry-After` (seconds or an HTTP date), else the
 * longest `t` among the `RateLimit` policies with nothing remaining. */
export function retryAfterSeconds(headers: Headers): number | undefined {
  const retryAfter = headers.get('retry-after')?.trim();
  if (retryAfter !== undefined) {
    if (/^\d+$/.test(retryAfter)) return Number(retryAfter);
    const when = Date.parse(retryAfter);
    return Number.isNaN(when) ? undefined : Math.max(0, (when - Date.now()) / 1000);
  }
  const exhausted: number[] = [];
  for (const item of (headers.get('ratelimit') ?? '').split(',')) {
    const parameters = new Map(
      item
        .split(';')
        .slice(1)
        .map((part) => part.trim().split('=', 2) as [string, string]),
    );
    const reset = parameters.get('t');
    if (parameters.get('r') === '0' && reset !== undefined && /^\d+$/.test(reset)) {
      exhausted.push(Number(reset));
    }
  }
  return exhausted.length > 0 ? Math.max(...exhausted) : undefined;
}

/** Whether sending `request` again cannot apply it twice. */
export function isRetryable(request: Request): boolean {
  return (
    IDEMPOTENT_METHODS.has(request.method) ||
    request.headers.has('idempotency-key') ||
    (request.method === 'POST' && READS_ONLY_POSTS.test(new URL(request.url).pathname))
  );
}

function delaySeconds(
  policy: RetryPolicy,
  attempt: number,
  response: Response | undefined,
): number | undefined {
  if (attempt >= policy.attempts) return undefined;
  if (response !== undefined) {
    if (!policy.statuses.includes(response.status)) return undefined;
    const asked = retryAfterSeconds(response.headers);
    if (asked !== undefined) return asked <= policy.maxDelay ? asked : undefined;
  }
  // Full jitter: callers that failed together do not come back together.
  return Math.random() * Math.min(policy.maxDelay, policy.backoff * 2 ** (attempt - 1));
}

// The answers of a gateway whose upstream may have applied the request before failing.
const OUTCOME_UNKNOWN_STATUSES = new Set([502, 504]);

const sleep = (seconds: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, seconds * 1000));

/** A `fetch` that retries what is safe to retry, for the generated client's `fetch` option. */
export function retryingFetch(
  policy: Partial<RetryPolicy> = {},
  fetchImpl: typeof fetch = globalThis.fetch,
  wait: (seconds: number) => Promise<void> = sleep,
): typeof fetch {
  const resolved = { ...DEFAULT_RETRY_POLICY, ...policy };
  return async (input, init) => {
    const request = new Request(input, init);
    const retryable = isRetryable(request);
    let mayHaveApplied = false;
    for (let attempt = 1; ; attempt += 1) {
      let delay: number | undefined;
      let response: Response;
      try {
        // A clone per attempt: a request body can be read only once.
        response = await fetchImpl(retryable ? request.clone() : request);
      } catch (error) {
        delay = retryable ? delaySeconds(resolved, attempt, undefined) : undefined;
        if (delay === undefined) throw error;
        mayHaveApplied = true;
        await wait(delay);
        continue;
      }
      if (mayHaveApplied && request.method === 'DELETE' && response.status === 404) {
        await response.body?.cancel();
        return new Response(null, { status: 204, statusText: 'No Content' });
      }
      delay = retryable ? delaySeconds(resolved, attempt, response) : undefined;
      if (delay === undefined) return response;
      await response.body?.cancel();
      if (OUTCOME_UNKNOWN_STATUSES.has(response.status)) mayHaveApplied = true;
      await wait(delay);
    }
  };
}
