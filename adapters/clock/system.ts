import type { Clock } from '../../domain/ports/clock.ts';

export const systemClock: Clock = {
  now: () => new Date(),
  sleep: (ms) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms))),
};
