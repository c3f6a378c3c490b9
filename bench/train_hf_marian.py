#!/usr/bin/env python3
"""A small Hugging Face MarianMTModel trained on the bundled corpus, for checking the converter on
a model that translates (python -m tern.convert --hf ... --verify N) where no OPUS-MT model can be
downloaded. Needs torch, transformers and sentencepiece (not Tern).

    python3 bench/train_hf_marian.py --out work/hf-marian --minutes 10
    PYTHONPATH=build/python python3 -m tern.convert --hf work/hf-marian --out work/hf-marian.tern \\
        --verify 100 --verify-source corpus/bible/test.es

It writes what save_pretrained and the OPUS-MT repositories hold: config.json (swish, scaled
embeddings, shared vocabulary, pad last and the decoder's start token), model.safetensors,
source.spm and target.spm (SentencePiece unigram models of each side), vocab.json (eos 0, unk 1,
both sides' pieces, pad last) and tokenizer_config.json. Training: AdamW, inverse square root
schedule with warm-up, label smoothing 0.1, batches of about --batch-tokens target tokens, for
--minutes of wall time, then one line of JSON with the updates and the dev loss.
"""

import argparse
import json
import math
import os
import random
import sys
import time


def train_spm(path_prefix, lines, vocab_size):
    import sentencepiece as spm

    text = path_prefix + ".txt"
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=path_prefix, vocab_size=vocab_size,
                                   character_coverage=1.0, model_type="unigram", minloglevel=2,
                                   num_threads=2)
    os.remove(text)
    os.remove(path_prefix + ".vocab")
    os.replace(path_prefix + ".model", path_prefix + ".spm")
    return spm.SentencePieceProcessor(model_file=path_prefix + ".spm")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="corpus/bible")
    parser.add_argument("--out", required=True)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--vocab-size", type=int, default=4000, help="per side")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--batch-tokens", type=int, default=2000)
    parser.add_argument("--lr", type=float, default=1.5e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    import torch
    import transformers

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)

    def read(split, lang):
        with open(os.path.join(args.corpus, f"{split}.{lang}"), encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]

    src, tgt = read("train", "es"), read("train", "en")
    sp_src = train_spm(os.path.join(args.out, "source"), src, args.vocab_size)
    sp_tgt = train_spm(os.path.join(args.out, "target"), tgt, args.vocab_size)
    pieces = ["</s>", "<unk>"]
    seen = set(pieces)
    for sp in (sp_src, sp_tgt):
        for i in range(sp.get_piece_size()):
            p = sp.id_to_piece(i)
            if not (sp.is_control(i) or sp.is_unknown(i)) and p not in seen:
                pieces.append(p)
                seen.add(p)
    pieces.append("<pad>")
    vocab = {p: i for i, p in enumerate(pieces)}
    pad, eos, unk = len(pieces) - 1, 0, 1
    with open(os.path.join(args.out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"model_max_length": 512, "separate_vocabs": False, "source_lang": "es",
                   "target_lang": "en"}, f)

    def ids(sp, line):
        return [vocab.get(p, unk) for p in sp.encode(line, out_type=str)] + [eos]

    pairs = [(ids(sp_src, s), ids(sp_tgt, t)) for s, t in zip(src, tgt)]
    pairs = [p for p in pairs if len(p[0]) <= 120 and len(p[1]) <= 120]
    dev = [(ids(sp_src, s), ids(sp_tgt, t)) for s, t in zip(read("dev", "es"), read("dev", "en"))]

    config = transformers.MarianConfig(
        vocab_size=len(pieces), decoder_vocab_size=len(pieces), d_model=args.d_model,
        encoder_layers=args.layers, decoder_layers=args.layers,
        encoder_attention_heads=max(args.d_model // 64, 1),
        decoder_attention_heads=max(args.d_model // 64, 1), encoder_ffn_dim=4 * args.d_model,
        decoder_ffn_dim=4 * args.d_model, max_position_embeddings=512,
        activation_function="swish", scale_embedding=True, pad_token_id=pad, eos_token_id=eos,
        decoder_start_token_id=pad, forced_eos_token_id=eos, dropout=0.1,
        attention_dropout=0.0, activation_dropout=0.0, share_encoder_decoder_embeddings=True)
    model = transformers.MarianMTModel(config)
    model.generation_config.bad_words_ids = [[pad]]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9,
                                  weight_decay=0.0)
    warmup = 400
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda u: min((u + 1) / warmup, math.sqrt(warmup / (u + 1))))

    def batches(data, shuffle):
        """Index lists of sentences of similar length, padded to about batch_tokens."""
        order = sorted(range(len(data)), key=lambda i: (len(data[i][1]), rng.random()))
        out, current, longest = [], [], 0
        for i in order:
            length = max(len(data[i][0]), len(data[i][1]))
            if current and max(longest, length) * (len(current) + 1) > args.batch_tokens:
                out.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, length)
        if current:
            out.append(current)
        if shuffle:
            rng.shuffle(out)
        return out

    def tensors(data, batch):
        s_len = max(len(data[i][0]) for i in batch)
        t_len = max(len(data[i][1]) for i in batch)
        source = torch.full((len(batch), s_len), pad)
        labels = torch.full((len(batch), t_len), -100)
        for k, i in enumerate(batch):
            source[k, :len(data[i][0])] = torch.tensor(data[i][0])
            labels[k, :len(data[i][1])] = torch.tensor(data[i][1])
        return source, (source != pad).long(), labels

    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1)

    def dev_loss():
        model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for batch in batches(dev, False):
                source, mask, labels = tensors(dev, batch)
                logits = model(input_ids=source, attention_mask=mask, labels=labels).logits
                nll = torch.nn.functional.cross_entropy(
                    logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100,
                    reduction="sum")
                total += nll.item()
                count += int((labels != -100).sum())
        model.train()
        return total / count

    start, updates, epoch = time.time(), 0, 0
    model.train()
    while time.time() - start < args.minutes * 60:
        epoch += 1
        for batch in batches(pairs, True):
            if time.time() - start >= args.minutes * 60:
                break
            source, mask, labels = tensors(pairs, batch)
            logits = model(input_ids=source, attention_mask=mask, labels=labels).logits
            loss = loss_fn(logits.view(-1, logits.size(-1)), labels.view(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            updates += 1
            if updates % 100 == 0:
                print(f"update {updates} epoch {epoch} loss {loss.item():.3f} "
                      f"{time.time() - start:.0f}s", file=sys.stderr, flush=True)
    model.eval()
    model.save_pretrained(args.out, safe_serialization=True)
    print(json.dumps({"updates": updates, "epochs": epoch, "dev_ce": round(dev_loss(), 4),
                      "minutes": args.minutes, "pieces": len(pieces)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
