// `ptybroker/client`: the SDK. Works in Node 20 (with `ws`) and in browsers.
export { PtyBroker, type PtyBrokerOptions, type CreateOptions, type OutputRange } from "./broker.js";
export { Pty, type ConnectOptions, type ConnectionState, type PtyEvents, type DataListener } from "./pty.js";
export { PtyBrokerError, type ClientErrorCode } from "./errors.js";
export type { Session, SessionStatus, SignalName } from "../shared/session.js";
export type { ExitInfo } from "../shared/protocol.js";
