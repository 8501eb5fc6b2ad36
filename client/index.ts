// `ptybroker/client`: the SDK. Works in Node 20 (with `ws`) and in browsers.
export { PtyBroker } from "./broker.js";
export {
  type PtyBrokerOptions,
  type CreateOptions,
  type ExecOptions,
  type SandboxOptions,
  type OutputRange,
  type RecordingRange,
  type ListFilter,
  type ListPageOptions,
} from "./broker-options.js";
export { Pty } from "./pty.js";
export {
  type ConnectOptions,
  type ConnectionState,
  type PtyEvents,
  type DataListener,
  type SessionPatch,
  type SocketLike,
} from "./pty-types.js";
export {
  type InputOptions,
  type InputResult,
  type ExpectOptions,
  type RunOptions,
  type ScreenRepaint,
  type CommandEvent,
} from "./agent.js";
export { EventStream, type BrokerEvent, type SessionEvent, type GapEvent, type EventsOptions } from "./events.js";
export { PtyBrokerError, type ClientErrorCode } from "./errors.js";
export { KeyCalls, type CreateKeyOptions } from "./keys.js";
export { KEY_SCOPES, type KeyScope, type KeyInfo, type MintedKey } from "../shared/keys.js";
export { WebhookCalls, AuditCalls, type CreateWebhookOptions, type AuditPageOptions } from "./webhooks.js";
export { verifyWebhook, WebhookVerifyError, type WebhookVerifyCode } from "../shared/webhook-signature.js";
export {
  WEBHOOK_EVENTS,
  AUDIT_ACTIONS,
  type WebhookInfo,
  type CreatedWebhook,
  type WebhookDelivery,
  type WebhookAttempt,
  type WebhookEventBody,
  type AuditEntry,
  type AuditActor,
  type AuditAction,
  type AuditPage,
} from "../shared/webhooks.js";
export type {
  Session,
  SessionStatus,
  SignalName,
  SessionPage,
  EndReason,
  TenantEvent,
  TenantEventType,
  SessionTimers,
  SessionNetwork,
  SessionLimits,
  SessionSandbox,
  ExecResult,
} from "../shared/session.js";
export type { ExitInfo } from "../shared/protocol.js";
export type { ExpectResult, CommandRecord, RunResult, ScreenState } from "../shared/agent.js";
