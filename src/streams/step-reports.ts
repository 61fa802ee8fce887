/**
 * Edge: layer-compute actor -> listeners (placement, tracing, calibration): one report per step.
 *   concurrency 1: reports are delivered in step order, on the event loop, after the step's eval
 *   buffer:        a ring of `bufferMax` reports for late subscribers; beyond it the oldest is
 *                  dropped and counted (a step report is never allowed to grow memory)
 *   error:         the request's failure is published as an error on the request's stream
 *   teardown:      complete() at the end of the request releases every subscriber
 */
import { Observable, Subject } from 'rxjs';

export class StepReportBus<T> {
  private readonly subject = new Subject<T>();
  private readonly ring: T[] = [];
  dropped = 0;

  constructor(private readonly bufferMax: number) {}

  publish(report: T): void {
    if (this.ring.length >= this.bufferMax) {
      this.ring.shift();
      this.dropped++;
    }
    this.ring.push(report);
    this.subject.next(report);
  }

  fail(error: unknown): void {
    this.subject.error(error);
  }

  end(): void {
    this.subject.complete();
  }

  /** Live reports only (a subscriber that must not see an earlier request's). */
  live$(): Observable<T> {
    return this.subject.asObservable();
  }

  /** Replays the buffered reports, then follows live ones. */
  reports$(): Observable<T> {
    return new Observable<T>((subscriber) => {
      for (const r of this.ring) subscriber.next(r);
      return this.subject.subscribe(subscriber);
    });
  }
}
