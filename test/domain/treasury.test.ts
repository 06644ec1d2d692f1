import test from 'ava';
import { createHash } from 'node:crypto';
import { Keypair, PublicKey } from '@solana/web3.js';
import { TOKEN_2022_PROGRAM_ID as SPL_TOKEN_2022, TOKEN_PROGRAM_ID as SPL_TOKEN } from '@solana/spl-token';
import { associatedTokenAccount, MPL_CORE_PROGRAM_ID, payToFor, treasuryOf } from '../../domain/treasury/derive.ts';
import { STABLES, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from '../../domain/shared/network.ts';

// An independent program-derived-address derivation written from the Solana definition: sha256 over the seeds,
// the bump, the program id and "ProgramDerivedAddress", taking the first bump (from 255 down) whose hash is not
// an ed25519 point. The curve check is plain bigint math, so it shares no code with web3.js or @noble/curves.

const P = 2n ** 255n - 19n;
const D = mod(-121665n * inverse(121666n));

function mod(a: bigint): bigint {
  const r = a % P;
  return r >= 0n ? r : r + P;
}

function power(base: bigint, exp: bigint): bigint {
  let result = 1n;
  let b = mod(base);
  let e = exp;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
    e >>= 1n;
  }
  return result;
}

function inverse(a: bigint): bigint {
  return power(a, P - 2n);
}

/** True when the 32 bytes decode to a point of edwards25519 (RFC 8032 §5.1.3 decoding, ZIP-215 lenient). */
function isOnCurve(bytes: Uint8Array): boolean {
  const copy = Uint8Array.from(bytes);
  copy[31]! &= 0x7f;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(copy[i]!);
  y = mod(y);
  const y2 = (y * y) % P;
  const x2 = mod((y2 - 1n) * inverse(mod(D * y2 + 1n)));
  if (x2 === 0n) return true;
  return power(x2, (P - 1n) / 2n) === 1n; // Euler's criterion: x² has a square root
}

function findPda(seeds: Uint8Array[], programId: string): string {
  const program = new PublicKey(programId).toBytes();
  for (let bump = 255; bump >= 0; bump--) {
    const hash = createHash('sha256');
    for (const seed of seeds) hash.update(seed);
    hash.update(Uint8Array.of(bump));
    hash.update(program);
    hash.update(Buffer.from('ProgramDerivedAddress'));
    const candidate = hash.digest();
    if (!isOnCurve(candidate)) return new PublicKey(candidate).toBase58();
  }
  throw new Error('no bump');
}

const ATA_PROGRAM_ID = 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL';
const bytes = (address: string) => new PublicKey(address).toBytes();
const independentTreasury = (asset: string) => findPda([Buffer.from('mpl-core-execute'), bytes(asset)], MPL_CORE_PROGRAM_ID);
const independentAta = (owner: string, mint: string, tokenProgram: string) => findPda([bytes(owner), bytes(tokenProgram), bytes(mint)], ATA_PROGRAM_ID);

test('the independent curve check agrees with known on-curve and off-curve keys', (t) => {
  for (let i = 0; i < 20; i++) t.true(isOnCurve(Keypair.generate().publicKey.toBytes()), 'a wallet key is on the curve');
  // PDAs from web3.js are off the curve by construction.
  const [pda] = PublicKey.findProgramAddressSync([Buffer.from('x')], new PublicKey(MPL_CORE_PROGRAM_ID));
  t.false(isOnCurve(pda.toBytes()));
});

test('the token program ids are the real ones and every curated mint is a valid address', (t) => {
  t.is(TOKEN_PROGRAM_ID, SPL_TOKEN.toBase58());
  t.is(TOKEN_2022_PROGRAM_ID, SPL_TOKEN_2022.toBase58());
  t.is(TOKEN_2022_PROGRAM_ID, 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb');
  for (const network of ['chain-devnet', 'chain-mainnet'] as const) {
    for (const stable of STABLES[network]) {
      t.notThrows(() => new PublicKey(stable.mint), `${network} ${stable.symbol}`);
      t.is(stable.tokenProgramId, stable.tokenProgram === 'spl' ? TOKEN_PROGRAM_ID : TOKEN_2022_PROGRAM_ID);
    }
  }
});

test('treasuryOf is the Metaplex Core asset-signer PDA ["mpl-core-execute", asset]', (t) => {
  t.is(MPL_CORE_PROGRAM_ID, 'CoREENxT6tW1HoK8ypY1SxRMZTcVPm7R94rH4PZNhX7d');
  for (let i = 0; i < 10; i++) {
    const asset = Keypair.generate().publicKey.toBase58();
    const treasury = treasuryOf(asset);
    t.is(treasury, independentTreasury(asset));
    t.false(isOnCurve(bytes(treasury)), 'a PDA has no private key');
  }
  t.is(treasuryOf('11111111111111111111111111111111'), independentTreasury('11111111111111111111111111111111'));
});

test('associatedTokenAccount matches the ATA program derivation for both token programs', (t) => {
  const owner = treasuryOf(Keypair.generate().publicKey.toBase58());
  const [usdc] = STABLES['chain-devnet'];
  t.is(associatedTokenAccount(owner, usdc!.mint, TOKEN_PROGRAM_ID), independentAta(owner, usdc!.mint, TOKEN_PROGRAM_ID));
  const usdg = STABLES['chain-mainnet'].find((s) => s.symbol === 'USDG')!;
  t.is(usdg.tokenProgramId, TOKEN_2022_PROGRAM_ID);
  const ata2022 = associatedTokenAccount(owner, usdg.mint, TOKEN_2022_PROGRAM_ID);
  t.is(ata2022, independentAta(owner, usdg.mint, TOKEN_2022_PROGRAM_ID));
  t.not(ata2022, associatedTokenAccount(owner, usdg.mint, TOKEN_PROGRAM_ID), 'the token program is part of the seeds');
});

test('payToFor is the ATA of the treasury PDA for each curated stable', (t) => {
  const asset = Keypair.generate().publicKey.toBase58();
  const treasury = independentTreasury(asset);
  for (const network of ['chain-devnet', 'chain-mainnet'] as const) {
    for (const stable of STABLES[network]) {
      t.is(payToFor(asset, stable), independentAta(treasury, stable.mint, stable.tokenProgramId), `${network} ${stable.symbol}`);
    }
  }
});
