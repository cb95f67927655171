export { RateLimitClient } from "./client";
export type { RateLimitClientOptions, Health } from "./client";
export { functionsZone, BACKENDS, LIBRARY_PATH } from "./backend";
export type { Backend } from "./backend";
export type { Decision, LeaseDecision, AllDecision, RuleState, DayHourDecision, LockCountDecision } from "./decisions";
export { ReplyShapeError } from "./decisions";
export * from "./errors";
export type {
  WindowRule,
  BucketRule,
  Period,
  Periods,
  CallOptions,
  CostOptions,
  WriteOptions,
  ThrottleOptions,
  ThrottlePeekOptions,
  LeaseOptions,
  LeasePeekOptions,
  DayHourOptions,
  LockCountOptions,
  Clause,
  AllOptions,
} from "./build";
export type { Call, Transport, RedisLike } from "./transport";
export { transportFor } from "./transport";
export { Policy } from "./policy";
export { parseLimits } from "./text";
export type { TextLimit } from "./text";
export type { PolicyOptions, LimitOptions, Limit, LimitKind, FailureMode } from "./policy";
export { RateLimiter, Permit, PermitClosedError } from "./limiter";
export type { PolicyCall } from "./combined";
export type { LimitState, PolicyDecision, DecideOptions, AcquireOptions, RateLimiterOptions } from "./limiter";
export { isZone } from "./args";
export { RuntimeLimits, hashKey as runtimeLimitsKey } from "./overrides";
export type { DecisionHooks, DecisionEvent, LateGiveBack, Outcome, RedisDownMode } from "./hooks";
