import test from 'ava';
import fc from 'fast-check';
import { PublicKey } from '@solana/web3.js';
import { getAssociatedTokenAddressSync } from '@solana/spl-token';
import { findProgramAddress, isOnCurve } from '../../domain/shared/program-address.ts';
import { associatedTokenAccount, MPL_CORE_PROGRAM_ID, treasuryOf } from '../../domain/treasury/derive.ts';
import { ASSOCIATED_TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from '../../domain/shared/program-ids.ts';
import { encodeBase58 } from '../../domain/shared/base58.ts';
import { memoize } from '../../domain/shared/memo.ts';

// The gateway derives treasuries and token accounts itself (the embedded ledger's thread loads no web3.js); every
// derivation must be the one web3.js and spl-token compute, or money would be sent where nobody can move it.

const address = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => encodeBase58(b));

test('program addresses and bumps are those of web3.js findProgramAddressSync, for any seeds', (t) => {
  fc.assert(
    fc.property(fc.array(fc.uint8Array({ maxLength: 32 }), { maxLength: 4 }), address, (seeds, program) => {
      const [expected, bump] = PublicKey.findProgramAddressSync(
        seeds.map((s) => Buffer.from(s)),
        new PublicKey(program),
      );
      const ours = findProgramAddress(seeds, program);
      return ours.address === expected.toBase58() && ours.bump === bump;
    }),
    { numRuns: 40 },
  );
  t.pass();
});

test('treasuries and associated token accounts (off-curve owners too) are those of web3.js and spl-token', (t) => {
  fc.assert(
    fc.property(address, address, fc.constantFrom(TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID), (asset, mint, tokenProgram) => {
      const [treasury] = PublicKey.findProgramAddressSync(
        [Buffer.from('mpl-core-execute'), new PublicKey(asset).toBuffer()],
        new PublicKey(MPL_CORE_PROGRAM_ID),
      );
      if (treasuryOf(asset) !== treasury.toBase58()) return false;
      const ata = getAssociatedTokenAddressSync(new PublicKey(mint), treasury, true, new PublicKey(tokenProgram), new PublicKey(ASSOCIATED_TOKEN_PROGRAM_ID));
      return associatedTokenAccount(treasury.toBase58(), mint, tokenProgram) === ata.toBase58();
    }),
    { numRuns: 40 },
  );
  t.pass();
});

test('the on-curve check agrees with web3.js; a bad address or an over-long seed is refused', (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => isOnCurve(bytes) === PublicKey.isOnCurve(bytes)),
    { numRuns: 100 },
  );
  t.true(isOnCurve(new PublicKey(TOKEN_PROGRAM_ID).toBytes()) === PublicKey.isOnCurve(new PublicKey(TOKEN_PROGRAM_ID).toBytes()));
  t.throws(() => findProgramAddress([], 'not-an-address'), { instanceOf: TypeError });
  t.throws(() => findProgramAddress([new Uint8Array(33)], TOKEN_PROGRAM_ID), { instanceOf: TypeError });
  t.throws(() => treasuryOf('0OIl'), { instanceOf: TypeError });
});

test('the derivations memo answers what the function does, computes a recent key once, and holds at most its bound', (t) => {
  const calls: string[] = [];
  const memo = memoize((key) => {
    calls.push(key);
    return `v:${key}`;
  }, 4);
  for (const key of ['a', 'b', 'a', 'b', 'a']) t.is(memo(key), `v:${key}`);
  t.deepEqual(calls, ['a', 'b'], 'a recent key is not computed again');
  // keys asked for keep their entries as others come and go; one nobody asked for is dropped within two generations
  for (const key of ['c', 'a', 'd', 'a', 'e', 'a', 'f']) memo(key);
  t.is(calls.filter((k) => k === 'a').length, 1);
  memo('b');
  t.is(calls.filter((k) => k === 'b').length, 2, 'an entry not asked for since was dropped');
  fc.assert(
    fc.property(fc.array(fc.constantFrom('p', 'q', 'r', 's', 't', 'u', 'v'), { maxLength: 200 }), (keys) => {
      let computed = 0;
      const m = memoize((key) => {
        computed++;
        return key.toUpperCase();
      }, 4);
      return keys.every((k) => m(k) === k.toUpperCase()) && computed <= keys.length;
    }),
  );
});
