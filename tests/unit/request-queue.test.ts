import { describe, expect, it } from 'vitest';
import { LimitExceededError, RequestAbortedError } from '../../src/core/errors.js';
import { RequestQueue } from '../../src/engine/request-queue.js';

describe('RequestQueue', () => {
  it('runs requests one at a time in arrival order', async () => {
    const queue = new RequestQueue(8);
    const log: string[] = [];
    const job = async (name: string) => {
      const release = await queue.acquire();
      log.push(`${name}+`);
      await new Promise((r) => setTimeout(r, 5));
      log.push(`${name}-`);
      release();
    };
    await Promise.all([job('a'), job('b'), job('c')]);
    expect(log).toEqual(['a+', 'a-', 'b+', 'b-', 'c+', 'c-']);
  });

  it('refuses past its depth and skips an aborted waiter', async () => {
    const queue = new RequestQueue(1);
    const first = await queue.acquire();
    const controller = new AbortController();
    const second = queue.acquire(controller.signal);
    await expect(queue.acquire()).rejects.toBeInstanceOf(LimitExceededError);
    controller.abort();
    // Aborted while waiting: rejected at once, before the running request released, its place free.
    await expect(second).rejects.toBeInstanceOf(RequestAbortedError);
    expect(queue.depth).toBe(0);
    const fourth = queue.acquire();
    first();
    (await fourth)();
    const third = await queue.acquire();
    third();
  });

  it('lets depthMax requests wait behind the running one, in a burst too, and counts releases', async () => {
    const queue = new RequestQueue(2);
    const burst = [queue.acquire(), queue.acquire(), queue.acquire()]; // one runs, two wait
    await expect(queue.acquire()).rejects.toThrow(/limit requestQueueDepthMax exceeded: 3 > 2/);
    expect(queue.depth).toBe(2);
    const first = await burst[0];
    first();
    first(); // a second release changes nothing
    const next = queue.acquire(); // room again: one running, two waiting
    expect(queue.depth).toBe(2);
    for (const p of [...burst.slice(1), next]) (await p)();
    expect(queue.depth).toBe(0);
  });

  it('runs `capacity` requests at once, in arrival order after them, and an exclusive hold waits for all', async () => {
    const queue = new RequestQueue(8, 3);
    const running = await Promise.all([queue.acquire(), queue.acquire(), queue.acquire()]);
    expect(queue.running).toBe(3);
    const order: string[] = [];
    const fourth = queue.acquire().then((r) => (order.push('fourth'), r));
    const close = queue.acquire(undefined, { exclusive: true }).then((r) => (order.push('close'), r));
    const after = queue.acquire().then((r) => (order.push('after'), r));
    expect(queue.depth).toBe(3);
    running[0]();
    (await fourth)();
    expect(order).toEqual(['fourth']);
    running[1]();
    running[2]();
    const closeRelease = await close;
    expect(queue.running).toBe(0); // the exclusive holder is no request
    expect(order).toEqual(['fourth', 'close']);
    closeRelease();
    (await after)();
    expect(order).toEqual(['fourth', 'close', 'after']);
    expect(queue.running).toBe(0);
  });

  it('admits the waiters behind an exclusive one that aborts', async () => {
    const queue = new RequestQueue(8, 2);
    const a = await queue.acquire();
    const controller = new AbortController();
    const exclusive = queue.acquire(controller.signal, { exclusive: true });
    const b = queue.acquire();
    controller.abort();
    await expect(exclusive).rejects.toBeInstanceOf(RequestAbortedError);
    (await b)(); // a free place and nobody ahead: admitted at the abort
    a();
  });
});
