import type { Facilitator } from '../../domain/ports/facilitator.ts';
import type { FacilitatorRequest } from '../../domain/facilitator/wire.ts';
import type { MppSettleRequest } from '../../domain/facilitator/mpp.ts';
import type { PrepareAccountsRequest } from '../../domain/treasury/accounts.ts';

/**
 * The paywall's default: this process's facilitator, called directly. Requests and answers cross as JSON copies so
 * neither side can hold on to the other's objects — the same contract the HTTP adapter has on the wire.
 */
export class InProcessFacilitator implements Facilitator {
  constructor(private readonly facilitator: Facilitator) {}

  supported() {
    return this.facilitator.supported();
  }

  health() {
    return this.facilitator.health();
  }

  async verify(request: FacilitatorRequest) {
    return structuredClone(await this.facilitator.verify(structuredClone(request)));
  }

  async settle(request: FacilitatorRequest) {
    return structuredClone(await this.facilitator.settle(structuredClone(request)));
  }

  async prepareAccounts(request: PrepareAccountsRequest) {
    return structuredClone(await this.facilitator.prepareAccounts(structuredClone(request)));
  }

  async mppSettle(request: MppSettleRequest) {
    return structuredClone(await this.facilitator.mppSettle(structuredClone(request)));
  }

  async cosign(request: FacilitatorRequest) {
    return structuredClone(await this.facilitator.cosign(structuredClone(request)));
  }
}
