import {
  InstructionErrorBorshIo,
  InstructionErrorCustom,
  TransactionErrorDuplicateInstruction,
  TransactionErrorInstructionError,
  TransactionErrorInsufficientFundsForRent,
  TransactionErrorProgramExecutionTemporarilyRestricted,
  type FailedTransactionMetadata,
} from 'litesvm/dist/internal.js';
import type { LedgerTransactionError } from '../../../domain/ports/ledger.ts';

// LiteSVM's error objects → the JSON the Solana RPC returns for a TransactionError (agave's serde form).

/** agave `TransactionError` unit variants, in LiteSVM's `TransactionErrorFieldless` order */
const TRANSACTION_ERRORS = [
  'AccountInUse',
  'AccountLoadedTwice',
  'AccountNotFound',
  'ProgramAccountNotFound',
  'InsufficientFundsForFee',
  'InvalidAccountForFee',
  'AlreadyProcessed',
  'BlockhashNotFound',
  'CallChainTooDeep',
  'MissingSignatureForFee',
  'InvalidAccountIndex',
  'SignatureFailure',
  'InvalidProgramForExecution',
  'SanitizeFailure',
  'ClusterMaintenance',
  'AccountBorrowOutstanding',
  'WouldExceedMaxBlockCostLimit',
  'UnsupportedVersion',
  'InvalidWritableAccount',
  'WouldExceedMaxAccountCostLimit',
  'WouldExceedAccountDataBlockLimit',
  'TooManyAccountLocks',
  'AddressLookupTableNotFound',
  'InvalidAddressLookupTableOwner',
  'InvalidAddressLookupTableData',
  'InvalidAddressLookupTableIndex',
  'InvalidRentPayingAccount',
  'WouldExceedMaxVoteCostLimit',
  'WouldExceedAccountDataTotalLimit',
  'MaxLoadedAccountsDataSizeExceeded',
  'ResanitizationNeeded',
  'InvalidLoadedAccountsDataSizeLimit',
  'UnbalancedTransaction',
  'ProgramCacheHitMaxLimit',
  'CommitCancelled',
] as const;

/** agave `InstructionError` unit variants, in LiteSVM's `InstructionErrorFieldless` order */
const INSTRUCTION_ERRORS = [
  'GenericError',
  'InvalidArgument',
  'InvalidInstructionData',
  'InvalidAccountData',
  'AccountDataTooSmall',
  'InsufficientFunds',
  'IncorrectProgramId',
  'MissingRequiredSignature',
  'AccountAlreadyInitialized',
  'UninitializedAccount',
  'UnbalancedInstruction',
  'ModifiedProgramId',
  'ExternalAccountLamportSpend',
  'ExternalAccountDataModified',
  'ReadonlyLamportChange',
  'ReadonlyDataModified',
  'DuplicateAccountIndex',
  'ExecutableModified',
  'RentEpochModified',
  'NotEnoughAccountKeys',
  'AccountDataSizeChanged',
  'AccountNotExecutable',
  'AccountBorrowFailed',
  'AccountBorrowOutstanding',
  'DuplicateAccountOutOfSync',
  'InvalidError',
  'ExecutableDataModified',
  'ExecutableLamportChange',
  'ExecutableAccountNotRentExempt',
  'UnsupportedProgramId',
  'CallDepth',
  'MissingAccount',
  'ReentrancyNotAllowed',
  'MaxSeedLengthExceeded',
  'InvalidSeeds',
  'InvalidRealloc',
  'ComputationalBudgetExceeded',
  'PrivilegeEscalation',
  'ProgramEnvironmentSetupFailure',
  'ProgramFailedToComplete',
  'ProgramFailedToCompile',
  'Immutable',
  'IncorrectAuthority',
  'AccountNotRentExempt',
  'InvalidAccountOwner',
  'ArithmeticOverflow',
  'UnsupportedSysvar',
  'IllegalOwner',
  'MaxAccountsDataAllocationsExceeded',
  'MaxAccountsExceeded',
  'MaxInstructionTraceLengthExceeded',
  'BuiltinProgramsMustConsumeComputeUnits',
  'BorshIoError',
] as const;

function instructionError(e: unknown): unknown {
  if (typeof e === 'number') return INSTRUCTION_ERRORS[e] ?? 'GenericError';
  if (e instanceof InstructionErrorCustom) return { Custom: e.code };
  if (e instanceof InstructionErrorBorshIo) return 'BorshIoError';
  return 'GenericError';
}

export function transactionErrorJson(failed: FailedTransactionMetadata): LedgerTransactionError {
  const e: unknown = failed.err();
  if (typeof e === 'number') return TRANSACTION_ERRORS[e] ?? 'SanitizeFailure';
  if (e instanceof TransactionErrorInstructionError) return { InstructionError: [e.index, instructionError(e.err())] };
  if (e instanceof TransactionErrorDuplicateInstruction) return { DuplicateInstruction: e.index };
  if (e instanceof TransactionErrorInsufficientFundsForRent) return { InsufficientFundsForRent: { account_index: e.accountIndex } };
  if (e instanceof TransactionErrorProgramExecutionTemporarilyRestricted) {
    return { ProgramExecutionTemporarilyRestricted: { account_index: e.accountIndex } };
  }
  return 'SanitizeFailure';
}

/** Agave's human text for the preflight failure message, e.g. "Blockhash not found". */
export function describeTransactionError(err: LedgerTransactionError): string {
  if (typeof err === 'string') {
    const known: Record<string, string> = {
      BlockhashNotFound: 'Blockhash not found',
      AlreadyProcessed: 'This transaction has already been processed',
      AccountNotFound: 'Attempt to debit an account but found no record of a prior credit.',
      InsufficientFundsForFee: 'Insufficient funds for fee',
      SignatureFailure: 'Transaction did not pass signature verification',
      SanitizeFailure: 'Transaction failed to sanitize accounts offsets correctly',
    };
    return known[err] ?? err;
  }
  const rent = (err as { InsufficientFundsForRent?: { account_index: number } }).InsufficientFundsForRent;
  if (rent) return `Transaction results in an account (${rent.account_index}) with insufficient funds for rent`;
  const ie = (err as { InstructionError?: [number, unknown] }).InstructionError;
  if (ie) {
    const [index, inner] = ie;
    const what =
      typeof inner === 'string'
        ? inner
        : (inner as { Custom?: number }).Custom !== undefined
          ? `custom program error: 0x${(inner as { Custom: number }).Custom.toString(16)}`
          : JSON.stringify(inner);
    return `Error processing Instruction ${index}: ${what}`;
  }
  return JSON.stringify(err);
}
