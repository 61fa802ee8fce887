import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { telemetryPlan } from '../../otel/plan.js';
import { otlpTracesEndpoint } from '../../otel/setup.js';

describe('telemetry plan from OTEL_* variables', () => {
  it('is off when nothing is configured', () => {
    expect(telemetryPlan({})).toEqual({
      disabled: false,
      traceExporters: [],
      metricsFromEnv: false,
      exportTimeoutMs: 5000,
      warnings: [],
    });
    expect(telemetryPlan({ OTEL_SERVICE_NAME: 'moetier' }).traceExporters).toEqual([]);
  });

  it('turns OTLP traces and metrics on with an endpoint', () => {
    expect(telemetryPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318' })).toMatchObject({
      traceExporters: ['otlp'],
      metricsFromEnv: true,
    });
    expect(telemetryPlan({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://j:4318/v1/traces' }).traceExporters).toEqual([
      'otlp',
    ]);
    expect(
      telemetryPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x', OTEL_METRICS_EXPORTER: 'none' }).metricsFromEnv,
    ).toBe(false);
  });

  it('follows OTEL_TRACES_EXPORTER and OTEL_SDK_DISABLED', () => {
    expect(telemetryPlan({ OTEL_TRACES_EXPORTER: 'otlp' }).traceExporters).toEqual(['otlp']);
    expect(telemetryPlan({ OTEL_TRACES_EXPORTER: 'console, otlp' }).traceExporters).toEqual(['console', 'otlp']);
    expect(telemetryPlan({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x' })).toMatchObject({
      traceExporters: [],
      metricsFromEnv: false,
    });
    expect(telemetryPlan({ OTEL_TRACES_EXPORTER: 'console' }).metricsFromEnv).toBe(false);
    expect(telemetryPlan({ OTEL_METRICS_EXPORTER: 'console' }).metricsFromEnv).toBe(true);
    expect(telemetryPlan({ OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x' })).toMatchObject({
      disabled: true,
      traceExporters: [],
    });
  });

  it('answers http/protobuf with JSON and a warning; refuses grpc and unknown exporters by name', () => {
    const plan = telemetryPlan({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    });
    expect(plan.warnings).toEqual([expect.stringMatching(/^OTEL_EXPORTER_OTLP_PROTOCOL=http\/protobuf: .*JSON/)]);
    const refused = (env: Record<string, string>, variable: string) => {
      expect(() => telemetryPlan(env)).toThrow(InvalidOptionError);
      expect(() => telemetryPlan(env)).toThrow(new RegExp(`^option ${variable}: expected`));
    };
    refused(
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' },
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
    );
    refused({ OTEL_TRACES_EXPORTER: 'zipkin' }, 'OTEL_TRACES_EXPORTER');
    refused({ OTEL_TRACES_EXPORTER: 'none,otlp' }, 'OTEL_TRACES_EXPORTER');
  });

  it('bounds every export by OTEL_EXPORTER_OTLP_TIMEOUT, 5 s when unset; refuses a bad value by name', () => {
    expect(telemetryPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x' }).exportTimeoutMs).toBe(5000);
    expect(
      telemetryPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x', OTEL_EXPORTER_OTLP_TIMEOUT: '1500' }).exportTimeoutMs,
    ).toBe(1500);
    expect(() => telemetryPlan({ OTEL_EXPORTER_OTLP_TIMEOUT: '0' })).toThrow(
      /^option OTEL_EXPORTER_OTLP_TIMEOUT: expected a number of milliseconds > 0/,
    );
    expect(() => telemetryPlan({ OTEL_EXPORTER_OTLP_TIMEOUT: 'soon' })).toThrow(InvalidOptionError);
  });

  it('refuses an OTLP endpoint that is not an absolute http(s) URL, by its variable (issue 27: they were not checked)', () => {
    for (const [variable, value] of [
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'localhost:4318'],
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'ftp://x'],
      ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'not a url'],
      ['OTEL_EXPORTER_OTLP_METRICS_ENDPOINT', 'http://'],
    ] as const) {
      expect(() => telemetryPlan({ [variable]: value }), `${variable}=${value}`).toThrow(
        new RegExp(`^option ${variable}: expected an absolute http:// or https:// URL`),
      );
    }
    expect(telemetryPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector.example:4318/' }).traceExporters).toEqual([
      'otlp',
    ]);
  });

  it('derives the traces URL as the OTLP exporter does', () => {
    expect(otlpTracesEndpoint({})).toBe('http://localhost:4318/v1/traces');
    expect(otlpTracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318/' })).toBe(
      'http://jaeger:4318/v1/traces',
    );
    expect(
      otlpTracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b/t' }),
    ).toBe('http://b/t');
  });
});
