// Problems as exceptions, one class per kind of failure. The class follows the HTTP status,
// which the service keeps stable per failure; the problem's own `code` (a stable string such as
// RATE_LIMITED or PRECONDITION_FAILED) is on every error for finer branching.
import { retryAfterSeconds } from './retry';

export class MnemeError extends Error {
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string;
  readonly traceId: string | undefined;
  /** Seconds the service asked the caller to wait before trying again, when it said. */
  readonly retryAfter: number | undefined;
  /** The whole problem document, with its extensions (`errors`, `current_etag`, `key_id`, …). */
  readonly problem: Record<string, unknown>;

  constructor(fields: {
    status: number;
    code: string;
    title: string;
    detail: string;
    traceId?: string;
    retryAfter?: number;
    problem?: Record<string, unknown>;
  }) {
    super(`${fields.status} ${fields.code}: ${fields.detail}`);
    this.name = new.target.name;
    this.status = fields.status;
    this.code = fields.code;
    this.title = fields.title;
    this.detail = fields.detail;
    this.traceId = fields.traceId;
    this.retryAfter = fields.retryAfter;
    this.problem = fields.problem ?? {};
  }
}

/** 400: the request cannot be read. */
export class BadRequest extends MnemeError {}
/** 401: no valid token or API key. */
export class Unauthenticated extends MnemeError {}
/** 403: the caller may not do this. */
export class Forbidden extends MnemeError {}
/** 404: no such resource for this caller (other tenants' and users' data reads as absent). */
export class NotFound extends MnemeError {}
/** 409: the request conflicts with the resource's state or an earlier request. */
export class Conflict extends MnemeError {}
/** 412: someone changed the resource since the `If-Match` tag was read. */
export class PreconditionFailed extends MnemeError {}
/** 422 (and 413, 414, 415, 431: a body, URL or headers the service will not take): see
 * `problem.errors`. */
export class ValidationFailed extends MnemeError {}
/** 429: too many requests; `retryAfter` says when to try again. */
export class RateLimited extends MnemeError {}
/** 5xx: the service failed; the `traceId` finds it in the service's traces. */
export class ServerError extends MnemeError {}
/** 503: a dependency (database, model provider) is unavailable for now. */
export class ServiceUnavailable extends ServerError {}

const BY_STATUS: Record<number, typeof MnemeError> = {
  400: BadRequest,
  401: Unauthenticated,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  412: PreconditionFailed,
  413: ValidationFailed,
  414: ValidationFailed,
  415: ValidationFailed,
  422: ValidationFailed,
  431: ValidationFailed,
  429: RateLimited,
  503: ServiceUnavailable,
};

/** The error class for a failed response's status: `MnemeError` itself for a status no class
 * stands for (a 405, a 408), so that a subclass always means what its name says. */
export function errorClass(status: number): typeof MnemeError {
  return BY_STATUS[status] ?? (status >= 500 ? ServerError : MnemeError);
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** The error for a failed response, from its (already parsed) problem document if it has one. */
export function errorFromResponse(response: Response, body: unknown): MnemeError {
  const problem =
    body !== null && typeof body === 'object' && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : {};
  const Class = errorClass(response.status);
  return new Class({
    status: response.status,
    code: text(problem.code) ?? `HTTP_${response.status}`,
    title: text(problem.title) ?? response.statusText,
    detail: text(problem.detail) ?? (typeof body === 'string' ? body.slice(0, 500) : ''),
    traceId: text(problem.trace_id),
    retryAfter: retryAfterSeconds(response.headers),
    problem,
  });
}
