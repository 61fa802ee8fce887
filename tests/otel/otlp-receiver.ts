/**
 * A real OTLP/HTTP receiver on loopback, for tests: accepts JSON exports on /v1/traces and
 * /v1/metrics (gzip or plain), decodes them into flat records, answers 200 with an empty
 * JSON body as a collector does. Protobuf bodies are answered 415 and counted, so a test
 * that forgot to pick JSON fails on `rejected`, not on a silent empty list.
 *
 *   const receiver = await startOtlpReceiver();
 *   process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;   // http://127.0.0.1:<port>
 *   ... emit, shut the SDK down ...
 *   const spans = await receiver.waitForSpans((s) => s.length >= 2);
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

export type AttributeValue = string | number | boolean | AttributeValue[] | null;

export interface ReceivedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttributeValue>;
  resource: Record<string, AttributeValue>;
  scope: string;
}

export interface ReceivedMetric {
  name: string;
  unit: string;
  description: string;
  /** Sum (counters) or sum / count (histograms) per data point, with the point's attributes. */
  points: { sum: number; count?: number; attributes: Record<string, AttributeValue> }[];
}

export interface OtlpReceiver {
  readonly url: string;
  readonly spans: ReceivedSpan[];
  readonly metrics: ReceivedMetric[];
  readonly requests: { path: string; contentType: string }[];
  readonly rejected: number;
  waitForSpans(done: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const metrics: ReceivedMetric[] = [];
  const requests: { path: string; contentType: string }[] = [];
  let rejected = 0;
  const server = createServer(async (req, res) => {
    const contentType = req.headers['content-type'] ?? '';
    requests.push({ path: req.url ?? '', contentType });
    const body = await readBody(req);
    if (!contentType.includes('json')) {
      rejected++;
      res.writeHead(415).end();
      return;
    }
    const payload = JSON.parse(body.toString('utf8'));
    if (req.url === '/v1/traces') spans.push(...decodeSpans(payload));
    else if (req.url === '/v1/metrics') metrics.push(...decodeMetrics(payload));
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    metrics,
    requests,
    get rejected() {
      return rejected;
    },
    async waitForSpans(done, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (!done(spans)) {
        if (Date.now() > deadline)
          throw new Error(`OTLP receiver: condition not met after ${timeoutMs} ms (${spans.length} spans)`);
        await new Promise((r) => setTimeout(r, 10));
      }
      return spans;
    },
    close: () => new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve()))),
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
}

function decodeSpans(payload: any): ReceivedSpan[] {
  return (payload.resourceSpans ?? []).flatMap((rs: any) => {
    const resource = attributesOf(rs.resource?.attributes);
    return (rs.scopeSpans ?? []).flatMap((ss: any) =>
      (ss.spans ?? []).map(
        (s: any): ReceivedSpan => ({
          name: s.name,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          attributes: attributesOf(s.attributes),
          resource,
          scope: ss.scope?.name ?? '',
        }),
      ),
    );
  });
}

function decodeMetrics(payload: any): ReceivedMetric[] {
  return (payload.resourceMetrics ?? []).flatMap((rm: any) =>
    (rm.scopeMetrics ?? []).flatMap((sm: any) =>
      (sm.metrics ?? []).map((m: any): ReceivedMetric => {
        const points = m.histogram?.dataPoints ?? m.sum?.dataPoints ?? m.gauge?.dataPoints ?? [];
        return {
          name: m.name,
          unit: m.unit ?? '',
          description: m.description ?? '',
          points: points.map((p: any) => ({
            sum: Number(p.sum ?? p.asDouble ?? p.asInt ?? 0),
            ...(p.count !== undefined ? { count: Number(p.count) } : {}),
            attributes: attributesOf(p.attributes),
          })),
        };
      }),
    ),
  );
}

function attributesOf(list: any[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((kv: any) => [kv.key, valueOf(kv.value)]));
}

function valueOf(v: any): AttributeValue {
  if (v == null) return null;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return Number(v.doubleValue);
  if ('arrayValue' in v) return (v.arrayValue.values ?? []).map(valueOf);
  return null;
}
