// PTYBROKER_URL as the CLI reads it, and the line it prints for an SDK error: pure logic, no
// server (test/cli.test.ts runs the CLI with such URLs against a real edge).
import { describe, expect, it } from "vitest";
import { PtyBrokerError } from "../index.js";
import { brokerUrl, errorLine, UsageError } from "./common.js";

describe("brokerUrl", () => {
  it("takes an http(s) URL as it is, without a trailing slash; unset or empty is the local default", () => {
    expect(brokerUrl("http://127.0.0.1:8877")).toBe("http://127.0.0.1:8877");
    expect(brokerUrl("https://edge.example.com/")).toBe("https://edge.example.com");
    expect(brokerUrl("https://edge.example.com/broker/")).toBe("https://edge.example.com/broker");
    expect(brokerUrl(undefined)).toBe("http://127.0.0.1:8787");
    expect(brokerUrl("")).toBe("http://127.0.0.1:8787");
  });

  it("drops a /v1 at the end (the API's prefix, which the SDK adds)", () => {
    expect(brokerUrl("http://127.0.0.1:8877/v1")).toBe("http://127.0.0.1:8877");
    expect(brokerUrl("http://127.0.0.1:8877/v1/")).toBe("http://127.0.0.1:8877");
    expect(brokerUrl("https://edge.example.com/broker/v1//")).toBe("https://edge.example.com/broker");
    expect(brokerUrl("https://edge.example.com/v10")).toBe("https://edge.example.com/v10");
  });

  it("refuses what is not an http(s) URL, saying what is wrong, with http:// suggested when the scheme is missing", () => {
    const refusal = (raw: string) => {
      try {
        brokerUrl(raw);
        return "accepted";
      } catch (error) {
        return error instanceof UsageError ? error.message : `not a usage error: ${String(error)}`;
      }
    };
    expect(refusal("127.0.0.1:8877")).toBe("PTYBROKER_URL=127.0.0.1:8877 is not an http:// or https:// URL; did you mean http://127.0.0.1:8877?");
    expect(refusal("localhost:8877")).toBe("PTYBROKER_URL=localhost:8877 is not an http:// or https:// URL; did you mean http://localhost:8877?");
    expect(refusal("edge.example.com")).toBe("PTYBROKER_URL=edge.example.com is not an http:// or https:// URL; did you mean http://edge.example.com?");
    expect(refusal("ws://127.0.0.1:8877")).toBe("PTYBROKER_URL=ws://127.0.0.1:8877 is not an http:// or https:// URL");
    expect(refusal("http://127.0.0.1:8877/?token=x")).toBe(
      "PTYBROKER_URL=http://127.0.0.1:8877/?token=x: give the edge's URL alone, without credentials, a query or a fragment",
    );
  });
});

describe("errorLine", () => {
  it("names the code and message, and the wait a 429 asked for", () => {
    expect(errorLine(new PtyBrokerError("QUOTA_EXCEEDED", "at most 2 sessions may run at once for this tenant", 429, 5))).toBe(
      "QUOTA_EXCEEDED: at most 2 sessions may run at once for this tenant (retry after 5 s)",
    );
    expect(errorLine(new PtyBrokerError("NOT_FOUND", "session x not found", 404))).toBe("NOT_FOUND: session x not found");
  });
});
