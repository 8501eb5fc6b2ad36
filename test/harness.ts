// Helpers for end-to-end tests, in one import. Each lives in a module of its concern:
// rest-client.ts (Api, fetchOutput), term-client.ts (the WebSocket terminal client),
// event-stream.ts (SSE readers), terminal-text.ts (escapes, screens, lines, digests), waits.ts
// (deadline-bound polling), processes.ts (/proc), stack-kit.ts (stacks of a suite's own),
// cleanup.ts (a suite's teardown) and shared-stack.ts (a suite on the shared stack).
export { Api, type ApiResponse, fetchOutput } from "./rest-client.js";
export { type OutputFrame, TermClient, type TermClientOptions, type TimelineEntry, shellOutput } from "./term-client.js";
export { EventStreamClient, type SseMessage, SseClient, tenantEvents } from "./event-stream.js";
export { line, renderScreen, seqBytes, sha256, stripEscapes } from "./terminal-text.js";
export { until } from "./waits.js";
export { alive, commandOf, hostPid, listeningOf, type ListeningSocket, liveSessionProcesses, parentPid, pidsRunning } from "./processes.js";
export { type SuiteCleanupOptions, SuiteCleanup } from "./cleanup.js";
export { listRunners, type SuiteRunner, type SuiteStack, type SuiteStackOptions, startSuiteStack, waitForRunners } from "./stack-kit.js";
export { SHARED_WORKSPACE, onSharedStack, type SharedStackSuite } from "./shared-stack.js";
