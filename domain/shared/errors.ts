// hosted-api §7 extended by DECISIONS "Wire conventions": one table, each transport maps from it once.
export const ERROR_CODES = {
  invalid_request: { status: 400, trpc: 'BAD_REQUEST' },
  // A GraphQL document over the cost, depth, alias or token limits, or whose answer exceeds the response cap.
  query_too_complex: { status: 400, trpc: 'BAD_REQUEST' },
  missing_api_key: { status: 401, trpc: 'UNAUTHORIZED' },
  invalid_api_key: { status: 401, trpc: 'UNAUTHORIZED' },
  forbidden: { status: 403, trpc: 'FORBIDDEN' },
  wrong_network: { status: 403, trpc: 'FORBIDDEN' },
  not_found: { status: 404, trpc: 'NOT_FOUND' },
  agent_not_found: { status: 404, trpc: 'NOT_FOUND' },
  event_not_found: { status: 404, trpc: 'NOT_FOUND' },
  receipt_not_found: { status: 404, trpc: 'NOT_FOUND' },
  payment_link_not_found: { status: 404, trpc: 'NOT_FOUND' },
  webhook_not_found: { status: 404, trpc: 'NOT_FOUND' },
  method_not_allowed: { status: 405, trpc: 'METHOD_NOT_SUPPORTED' },
  // The client did not send its whole request (headers and body) within the listener's bound (SVC_HTTP_*_TIMEOUT_MS).
  request_timeout: { status: 408, trpc: 'TIMEOUT' },
  conflict: { status: 409, trpc: 'CONFLICT' },
  idempotency_body_mismatch: { status: 409, trpc: 'CONFLICT' },
  idempotency_in_progress: { status: 409, trpc: 'CONFLICT' },
  // x402 payment-identifier: the paywall saw this payment id (per link) with another payment; nothing was settled.
  // details.payment_id. The same id with the same payment answers the stored response instead.
  payment_id_conflict: { status: 409, trpc: 'CONFLICT' },
  event_already_submitted: { status: 409, trpc: 'CONFLICT' },
  transaction_expired: { status: 409, trpc: 'CONFLICT' },
  // A submit of an event the ledger already refused (it is failed; nothing landed, nothing charged): prepare a new one.
  event_failed: { status: 409, trpc: 'CONFLICT' },
  // DECISIONS "Agents, submissions and events": the agent is not proven on the ledger (a row recorded before records
  // were checked, whose Core asset was never found): no link may name it and no payment goes into its treasury.
  // details say what the ledger holds at its address (found, program, asset_owner).
  agent_unproven: { status: 409, trpc: 'CONFLICT' },
  payment_link_disabled: { status: 410, trpc: 'NOT_FOUND' },
  disclosure_expired: { status: 410, trpc: 'NOT_FOUND' },
  payload_too_large: { status: 413, trpc: 'PAYLOAD_TOO_LARGE' },
  headers_too_large: { status: 431, trpc: 'BAD_REQUEST' },
  transaction_invalid: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  // The ledger refused a signed transaction in preflight (nothing landed, no fee paid); details carry err and logs.
  transaction_rejected: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  // agents/record: the ledger holds no Metaplex Core AssetV1 owned by the given owner at that address; details.found
  // says what it holds (nothing, another program's account, another owner's asset, a Core account that is no asset).
  agent_not_on_ledger: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  // fee-facilitator-mpp-tools §2.2.6, §7: a delegate's remaining allowance is below the gross (amount + protocol fee)
  // it would move; details.allowance_atomic and details.required_atomic say by how much to grow the delegation.
  insufficient_allowance: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  receipt_agent_mismatch: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  receipt_chain_invalid: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  receipt_hash_invalid: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  // buyer/quote: the URL did not answer (network, timeout, too large), answered something other than a 402,
  // or a 402 whose challenge cannot be read. details say which.
  quote_unreachable: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  payment_not_required: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  challenge_invalid: { status: 422, trpc: 'UNPROCESSABLE_CONTENT' },
  // buyer/payment/execute: the buyer agent's spend policy denied the payment; details.reasons and checks.
  spend_denied: { status: 403, trpc: 'FORBIDDEN' },
  rate_limited: { status: 429, trpc: 'TOO_MANY_REQUESTS' },
  internal_error: { status: 500, trpc: 'INTERNAL_SERVER_ERROR' },
  rpc_unavailable: { status: 502, trpc: 'BAD_GATEWAY' },
  upstream_failed: { status: 502, trpc: 'BAD_GATEWAY' },
  facilitator_unavailable: { status: 502, trpc: 'BAD_GATEWAY' },
  service_unavailable: { status: 503, trpc: 'SERVICE_UNAVAILABLE' },
  // The network's ledger lacks a program the route needs (e.g. the Metaplex Agent Registry or Core); details.program.
  program_unavailable: { status: 503, trpc: 'SERVICE_UNAVAILABLE' },
  submit_timeout: { status: 504, trpc: 'GATEWAY_TIMEOUT' },
  // The request's database work passed its class's budget (details.timeout_ms) or its client left.
  timeout: { status: 504, trpc: 'GATEWAY_TIMEOUT' },
  payment_pending: { status: 504, trpc: 'GATEWAY_TIMEOUT' },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;
export type TrpcCodeKey = (typeof ERROR_CODES)[ErrorCode]['trpc'];

export interface Issue {
  path: string;
  message: string;
  code: string;
}

export class DomainError extends Error {
  override readonly name = 'DomainError';
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.code = code;
    this.details = details;
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  static invalid(issues: Issue[], message = 'The request is invalid.'): DomainError {
    return new DomainError('invalid_request', message, { issues });
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}
