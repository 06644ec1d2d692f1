import test from 'ava';
import {
  AddressLookupTableAccount,
  Keypair,
  PublicKey,
  SystemProgram,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
import { DecodeError, decodeTransaction } from '../../domain/facilitator/decode.ts';
import { parseTransaction } from '../../domain/ledger/wire.ts';

// One transaction parser. domain/ledger/wire.ts parses (the embedded ledger's hot path uses its offsets);
// decodeTransaction names what it parsed. Both must read what web3.js reads, and refuse what the runtime refuses.

const payer = Keypair.generate();
const other = Keypair.generate();
const blockhash = Keypair.generate().publicKey.toBase58();
const memo = new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');

function signed(v0: boolean, lookups: AddressLookupTableAccount[] = []): VersionedTransaction {
  const instructions = [
    SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: other.publicKey, lamports: 5 }),
    new TransactionInstruction({ programId: memo, keys: [{ pubkey: other.publicKey, isSigner: true, isWritable: false }], data: Buffer.from('hi') }),
  ];
  const message = new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions });
  const tx = new VersionedTransaction(v0 ? message.compileToV0Message(lookups) : message.compileToLegacyMessage());
  tx.sign([payer, other]);
  return tx;
}

test('decodeTransaction reads legacy and v0 transactions as web3.js does, over the one parser', (t) => {
  const table = new AddressLookupTableAccount({
    key: Keypair.generate().publicKey,
    state: { deactivationSlot: 2n ** 64n - 1n, lastExtendedSlot: 0, lastExtendedSlotStartIndex: 0, addresses: [memo] },
  });
  for (const tx of [signed(false), signed(true), signed(true, [table])]) {
    const wire = tx.serialize();
    const d = decodeTransaction(wire);
    const m = tx.message;
    t.is(d.version as unknown, tx.version);
    t.deepEqual(
      d.accountKeys,
      m.staticAccountKeys.map((k) => k.toBase58()),
    );
    t.is(d.numRequiredSignatures, m.header.numRequiredSignatures);
    t.is(d.recentBlockhash, m.recentBlockhash);
    t.deepEqual(d.messageBytes, Uint8Array.from(m.serialize()));
    t.deepEqual(
      d.signatures,
      tx.signatures.map((s) => Uint8Array.from(s)),
    );
    t.is(d.addressTableLookups, m.addressTableLookups.length);
    t.deepEqual(
      d.instructions.map((ix) => ix.data),
      m.compiledInstructions.map((ix) => Uint8Array.from(ix.data)),
    );
    // the parser's offsets point at the same bytes
    const w = parseTransaction(wire);
    t.is(w.instructions.length, d.instructions.length);
    t.deepEqual(Uint8Array.from(w.bytes.subarray(w.messageOffset)), d.messageBytes);
  }
});

test('decodeTransaction refuses a fee payer used as the program (the runtime sanitize rule) and duplicate keys', (t) => {
  const wire = Uint8Array.from(signed(false).serialize());
  const w = parseTransaction(wire);
  const first = w.instructions[0]!;
  // program index → 0: the fee payer; web3.js parses it, the runtime refuses it
  const payerAsProgram = Uint8Array.from(wire);
  payerAsProgram[first.accountsOffset - 2] = 0;
  t.is(payerAsProgram[first.accountsOffset - 1], first.accountsLength);
  t.throws(() => decodeTransaction(payerAsProgram), { instanceOf: DecodeError, message: /program index/ });
  // the second static key copied over the third
  const twice = Uint8Array.from(wire);
  twice.copyWithin(w.keysOffset + 64, w.keysOffset + 32, w.keysOffset + 64);
  t.throws(() => decodeTransaction(twice), { instanceOf: DecodeError, message: /appears twice/ });
  t.throws(() => decodeTransaction(Uint8Array.from([...wire, 0])), { instanceOf: DecodeError, message: /trailing/ });
});
