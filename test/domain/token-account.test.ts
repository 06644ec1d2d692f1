import test from 'ava';
import { Keypair, PublicKey } from '@solana/web3.js';
import { ACCOUNT_SIZE, AccountLayout, AccountState, MINT_SIZE, MintLayout, unpackAccount, unpackMint } from '@solana/spl-token';
import { decodeMint, decodeTokenAccount, readTokenAmount } from '../../domain/shared/token-account.ts';
import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from '../../domain/shared/network.ts';

// domain/shared/token-account.ts is the one reader of the token account and mint layouts (facilitator,
// builders, treasury reads, paying client, embedded ledger); it must read what spl-token's own decoders read.

const key = () => Keypair.generate().publicKey;

function tokenAccountBytes(o: { delegate: PublicKey | null; closeAuthority: PublicKey | null; native: bigint | null; state: AccountState }): Buffer {
  const data = Buffer.alloc(ACCOUNT_SIZE);
  AccountLayout.encode(
    {
      mint: key(),
      owner: key(),
      amount: 12_345_678_901n,
      delegateOption: o.delegate ? 1 : 0,
      delegate: o.delegate ?? PublicKey.default,
      state: o.state,
      isNativeOption: o.native === null ? 0 : 1,
      isNative: o.native ?? 0n,
      delegatedAmount: o.delegate ? 777n : 0n,
      closeAuthorityOption: o.closeAuthority ? 1 : 0,
      closeAuthority: o.closeAuthority ?? PublicKey.default,
    },
    data,
  );
  return data;
}

/** Token-2022: the base, the account-type byte (2: account) and one TLV entry, ImmutableOwner (type 7, length 0). */
const with2022Extension = (base: Buffer, accountType: number) =>
  Buffer.concat([base, Buffer.alloc(ACCOUNT_SIZE - base.length), Buffer.from([accountType, 7, 0, 0, 0])]);

test('token accounts read as spl-token unpackAccount reads them, on SPL Token and Token-2022 with extensions', (t) => {
  const cases = [
    { program: TOKEN_PROGRAM_ID, data: tokenAccountBytes({ delegate: key(), closeAuthority: null, native: null, state: AccountState.Initialized }) },
    { program: TOKEN_PROGRAM_ID, data: tokenAccountBytes({ delegate: null, closeAuthority: key(), native: 2_039_280n, state: AccountState.Frozen }) },
    {
      program: TOKEN_2022_PROGRAM_ID,
      data: with2022Extension(tokenAccountBytes({ delegate: key(), closeAuthority: null, native: null, state: AccountState.Initialized }), 2),
    },
  ];
  for (const { program, data } of cases) {
    const ours = decodeTokenAccount({ owner: program, data });
    const theirs = unpackAccount(key(), { data, owner: new PublicKey(program), lamports: 1, executable: false }, new PublicKey(program));
    t.truthy(ours);
    t.deepEqual(
      {
        mint: ours!.mint,
        owner: ours!.owner,
        amount: ours!.amount,
        delegate: ours!.delegate,
        delegatedAmount: ours!.delegatedAmount,
        frozen: ours!.state === 'frozen',
        native: ours!.isNative,
        close: ours!.closeAuthority,
      },
      {
        mint: theirs.mint.toBase58(),
        owner: theirs.owner.toBase58(),
        amount: theirs.amount,
        delegate: theirs.delegate?.toBase58() ?? null,
        delegatedAmount: theirs.delegatedAmount,
        frozen: theirs.isFrozen,
        native: theirs.rentExemptReserve,
        close: theirs.closeAuthority?.toBase58() ?? null,
      },
    );
    t.is(readTokenAmount(data), theirs.amount);
  }
  t.deepEqual(decodeTokenAccount({ owner: TOKEN_2022_PROGRAM_ID, data: cases[2]!.data })!.extensions, [7]);
});

test('mints read as spl-token unpackMint reads them; a mint is not a token account and the reverse', (t) => {
  const base = Buffer.alloc(MINT_SIZE);
  MintLayout.encode(
    {
      mintAuthorityOption: 1,
      mintAuthority: key(),
      supply: 9_000_000n,
      decimals: 6,
      isInitialized: true,
      freezeAuthorityOption: 0,
      freezeAuthority: PublicKey.default,
    },
    base,
  );
  for (const [program, data] of [
    [TOKEN_PROGRAM_ID, base],
    [TOKEN_2022_PROGRAM_ID, with2022Extension(base, 1)],
  ] as const) {
    const ours = decodeMint({ owner: program, data });
    const theirs = unpackMint(key(), { data, owner: new PublicKey(program), lamports: 1, executable: false }, new PublicKey(program));
    t.deepEqual(
      { authority: ours!.mintAuthority, supply: ours!.supply, decimals: ours!.decimals, init: ours!.isInitialized, freeze: ours!.freezeAuthority },
      {
        authority: theirs.mintAuthority?.toBase58() ?? null,
        supply: theirs.supply,
        decimals: theirs.decimals,
        init: theirs.isInitialized,
        freeze: theirs.freezeAuthority?.toBase58() ?? null,
      },
    );
    t.is(decodeTokenAccount({ owner: program, data }), null);
  }
  const account = tokenAccountBytes({ delegate: null, closeAuthority: null, native: null, state: AccountState.Initialized });
  t.is(decodeMint({ owner: TOKEN_PROGRAM_ID, data: account }), null);
  // another program's bytes, a short buffer and nothing at all are not token accounts
  t.is(decodeTokenAccount({ owner: key().toBase58(), data: account }), null);
  t.is(decodeTokenAccount({ owner: TOKEN_PROGRAM_ID, data: account.subarray(0, 100) }), null);
  t.is(decodeTokenAccount(null), null);
  t.is(decodeMint(undefined), null);
});
