// Selection sets for the GraphQL types every wire field of which the tests compare with REST.

export const LINK_FIELDS = `
  id network label ownerAgent payTo method path price currency acceptsCurrencies protocol
  response { status mimeType body } webhookUrl webhookSecretSet webhookSecret wrapReceipt settlePolicy disabled facilitator shareUrl
  accepts { scheme network payTo payToTokenAccount payToReady asset amount currency }
  counters { callCount settledCount lastCalledAt lastSettledAt lastTxSig }
  metadata createdAt updatedAt`;

export const EVENT_FIELDS = `id kind phase network agentAsset signature blockTime confirmedAt slot errorCode errorLogs metadata clientReference createdAt`;
