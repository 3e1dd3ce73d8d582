"""Prompt-based representations (PromptBERT; prompt-based ClusterNS, docs/methods/clusterns.md): templates, the
[MASK] state as the embedding, template denoising, the two-template positive pair, and the prompt rows."""
import pytest
import torch

from tests.helpers.speed import CHUNKS
from textcore.encoding.prompt import PromptTemplates, split_template
from textcore.errors import ConfigError

# the module tests call training_step without a Trainer; self.log then only warns
pytestmark = pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")

BERT_FIRST = '*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*'
BERT_SECOND = '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*'
TEXTS = ["a cat sat on the mat", "dogs bark", "the quick brown fox jumps over it"]


@pytest.fixture(scope="module")
def tokenizer():
    from textcore.encoding.backbone import load_tokenizer

    return load_tokenizer("tiny")


def tiny_encoder(pooling="prompt_before_pooler", templates=(BERT_FIRST, BERT_SECOND)):
    from textcore.encoding.encoder import EncoderSettings, TextEncoder

    encoder = TextEncoder.from_name("tiny", EncoderSettings.outside_training(pooling, 32, list(templates)))
    return encoder.eval()  # no dropout: the hand-made references below run the backbone once more


def test_both_template_forms_read_the_same():
    ours = 'This sentence of "{sentence}" means{mask}.'
    assert split_template(BERT_FIRST) == (' This sentence of "', '" means{mask}.')
    assert split_template(ours) == ('This sentence of "', '" means{mask}.')
    with pytest.raises(ConfigError, match="sentence"):
        split_template("no placeholder {mask}")
    with pytest.raises(ConfigError, match="mask"):
        split_template("no mask {sentence}")


def test_template_tokens(tokenizer):
    template = PromptTemplates(tokenizer, [BERT_FIRST]).templates[0]
    assert tokenizer.convert_ids_to_tokens(list(template.prefix)) == ["[CLS]", "this", "sentence", "of", '"']
    assert tokenizer.convert_ids_to_tokens(list(template.suffix)) == ['"', "means", "[MASK]", ".", "[SEP]"]


def test_wrap_puts_each_sentence_between_the_template_tokens(tokenizer):
    templates = PromptTemplates(tokenizer, [BERT_FIRST, BERT_SECOND])
    tokens = tokenizer(TEXTS, padding=True, return_tensors="pt")
    first, lengths = templates.wrap(tokens, 0)
    second, _ = templates.wrap(tokens, 1)
    for i, text in enumerate(TEXTS):
        words = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert lengths[i] == len(words)
        row = first["input_ids"][i][first["attention_mask"][i].bool()].tolist()
        expected = tokenizer.convert_tokens_to_ids(["[CLS]", "this", "sentence", "of", '"']) + words + \
            tokenizer.convert_tokens_to_ids(['"', "means", "[MASK]", ".", "[SEP]"])
        assert row == expected
        assert first["attention_mask"][i].tolist() == [1] * len(row) + [0] * (first["input_ids"].shape[1] - len(row))
    # the positive pair: the same sentence in two templates gives two different inputs
    assert not torch.equal(first["input_ids"], second["input_ids"])
    second_prefix = tokenizer.convert_ids_to_tokens(second["input_ids"][0, :5].tolist())
    assert second_prefix == ["[CLS]", "this", "sentence", ":", '"']


def test_embedding_is_the_hidden_state_at_the_mask(tokenizer):
    encoder = tiny_encoder()
    tokens = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        pooled = encoder(**tokens, pooling="prompt_before_pooler")
        for i, text in enumerate(TEXTS):
            words = tokenizer(text, add_special_tokens=False)["input_ids"]
            ids = tokenizer.convert_tokens_to_ids(["[CLS]", "this", "sentence", "of", '"']) + words + \
                tokenizer.convert_tokens_to_ids(['"', "means", "[MASK]", ".", "[SEP]"])
            hidden = encoder.backbone(input_ids=torch.tensor([ids])).last_hidden_state[0]
            mask_at = 5 + len(words) + 2  # prefix (5) + sentence + '"' 'means'
            assert ids[mask_at] == tokenizer.mask_token_id
            assert torch.allclose(pooled[i], hidden[mask_at], atol=1e-5)


def test_denoising_subtracts_the_empty_template_at_the_sentence_positions(tokenizer):
    encoder = tiny_encoder()
    tokens = tokenizer(TEXTS, padding=True, return_tensors="pt")
    prefix = tokenizer.convert_tokens_to_ids(["[CLS]", "this", "sentence", "of", '"'])
    suffix = tokenizer.convert_tokens_to_ids(['"', "means", "[MASK]", ".", "[SEP]"])
    with torch.no_grad():
        plain = encoder(**tokens, pooling="prompt_before_pooler")
        denoised = encoder(**tokens, pooling="prompt_denoised")
        for i, text in enumerate(TEXTS):
            n = len(tokenizer(text, add_special_tokens=False)["input_ids"])
            positions = list(range(5)) + [5 + n + j for j in range(5)]  # as if the sentence were there
            hidden = encoder.backbone(input_ids=torch.tensor([prefix + suffix]),
                                      position_ids=torch.tensor([positions])).last_hidden_state[0]
            assert torch.allclose(denoised[i], plain[i] - hidden[7], atol=1e-5)  # [MASK] is the 8th token
            assert not torch.allclose(denoised[i], plain[i])


def test_training_views_use_the_two_templates_then_the_mlp(tokenizer):
    encoder = tiny_encoder(pooling="prompt")
    tokens = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        z1, z2 = encoder.prompt_views(tokens, denoise=False)
        first, _ = encoder.prompt.wrap(tokens, 0)
        second, _ = encoder.prompt.wrap(tokens, 1)
        assert torch.allclose(z1, encoder.mlp(encoder(**first, pooling="mask")), atol=1e-6)
        assert torch.allclose(z2, encoder.mlp(encoder(**second, pooling="mask")), atol=1e-6)
        assert not torch.allclose(z1, z2)


def test_prompt_pooling_without_templates_is_a_clear_error():
    from textcore.encoding.encoder import EncoderSettings, TextEncoder

    with pytest.raises(ConfigError, match="prompt_templates"):
        TextEncoder.from_name("tiny", EncoderSettings.outside_training("prompt_before_pooler"))


def test_prompt_clusterns_composes_with_clustering_and_bml_as_the_non_prompt_one(tokenizer):
    """The same hand-made batch: prompt ClusterNS's loss equals non-prompt ClusterNS's loss fed the prompt views,
    through warm-up, centroid initialisation and a clustered step (hard negatives + BML)."""
    from lightning_modules.clusterns.module import ClusterNS

    settings = dict(num_clusters=2, backbone="tiny", chunk_tokens=CHUNKS, temperature=0.05, momentum=0.1,
                    kmean_cosine=1.0, bml_weight=0.5, bml_alpha=0.1, bml_beta=0.3, seed=0)
    prompt = ClusterNS(pooling="prompt", eval_pooling="prompt_before_pooler", prompt_denoise=True,
                       prompt_templates=[BERT_FIRST, BERT_SECOND], **settings).eval()
    plain = ClusterNS(**settings)
    batch = dict(tokenizer(TEXTS, padding=True, return_tensors="pt"))
    for step in range(2):
        with torch.no_grad():
            z1, z2 = prompt.encoder.prompt_views(batch, denoise=True)
        plain.contrastive_inputs = lambda _batch, z1=z1, z2=z2: (z1, z2)
        expected = plain.training_step({}, 0)
        got = prompt.training_step(batch, 0)
        assert got.item() == pytest.approx(expected.item(), rel=1e-6)
        assert bool(prompt.clustering_started) and torch.allclose(prompt.centroids, plain.centroids)
    got.backward()  # the gradient reaches the backbone through the sentence and the empty template
    grads = [p.grad for p in prompt.encoder.backbone.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_prompt_rows_compose_with_the_authors_settings(tmp_path):
    from tests.helpers import compose_config

    rows = {
        "clusterns_prompt_bert_base": (512, 5e-5, 96, 5e-4, 0.4, "second", 1e-2, 0.0, 0.2, "bert-base-uncased"),
        "clusterns_prompt_bert_large": (256, 3e-5, 96, 1e-4, 0.2, "second", 5e-4, 0.25, 0.3, "bert-large-uncased"),
        "clusterns_prompt_roberta_base": (512, 5e-5, 128, 1e-3, 0.4, "none", 1e-2, 0.2, 0.6, "roberta-base"),
    }
    for row, (batch, lr, k, gamma, sigma, hard, lam, alpha, beta, backbone) in rows.items():
        cfg = compose_config([f"experiment={row}"], tmp_path)
        m = cfg.method
        assert (cfg.batch_size, m.lr, m.num_clusters, m.momentum, m.kmean_cosine) == (batch, lr, k, gamma, sigma)
        assert (m.hard_negatives, m.bml_weight, m.bml_alpha, m.bml_beta) == (hard, lam, alpha, beta)
        assert cfg.backbone.name == backbone and cfg.max_length == 34 and cfg.trainer.precision == "16-mixed"
        assert (m.pooling, m.eval_pooling, m.prompt_denoise) == ("prompt", "prompt_text", True)
        assert m.callbacks.sts_selection.pooling == "prompt_denoised" and m.callbacks.sts_selection.patience == 3
        assert ("roberta" in backbone) == ("'_*sent_0*_'" in m.prompt_templates[0])
    cfg = compose_config(["experiment=promptbert_bert_base"], tmp_path)
    assert (cfg.batch_size, cfg.method.lr, cfg.method._target_) == (256, 1e-5, "lightning_modules.simcse.SimCSE")
    assert cfg.method.callbacks.sts_selection.patience == 0 and cfg.method.prompt_denoise


PROMPT_ROWS = ["clusterns_prompt_bert_base", "clusterns_prompt_bert_large", "clusterns_prompt_roberta_base",
               "promptbert_bert_base"]


@pytest.mark.parametrize("row", PROMPT_ROWS)
def test_prompt_rows_run_a_few_steps_on_the_tiny_backbone(tmp_path, row):
    import json

    from ctclust.training.train import train
    from tests.helpers import compose_config, write_wiki_and_stsb

    wiki, _ = write_wiki_and_stsb(tmp_path)
    out = tmp_path / "run"
    overrides = [
        f"experiment={row}", "backbone=tiny", "trainer=cpu", "trainer.precision=32-true", f"dataset.path={wiki}",
        f"sts_data_dir={tmp_path / 'sts'}", "batch_size=8", "trainer.max_steps=2", "trainer.enable_progress_bar=false",
        "~callbacks.progress", "print_table=false", "callbacks.report.plots=false",
        "method.callbacks.sts_selection.every_n_steps=1",
    ] + (["method.num_clusters=2", "method.kmean_cosine=1.0"] if row.startswith("clusterns") else [])
    with pytest.warns(Warning, match="SICKR"):
        results = train(compose_config(overrides, out))
    assert results["steps"] == 2 and [h["step"] for h in results["sts_selection"]["history"]] == [1, 2]
    saved = json.loads((out / "results.json").read_text())
    assert saved["sts"]["pooling"] == "prompt_text"
    # the checkpoint carries its templates: the command-line evaluation embeds as the run did
    from ctclust.commands.sts import main

    cli = main(["--checkpoint", str(out / "checkpoints" / "best.ckpt"), "--data-dir", str(tmp_path / "sts"),
                "--tasks", "STSB"])
    assert cli["avg"] == pytest.approx(saved["sts"]["avg"], abs=1e-9)


def test_export_of_a_prompt_model_is_refused_with_the_reason(tmp_path):
    from evaluation.model_io.export import export_encoder

    with pytest.raises(ConfigError, match="MASK.*template"):
        export_encoder(tiny_encoder(), "prompt_before_pooler", tmp_path / "out")


def test_prompt_text_fills_the_template_as_the_authors_final_test_does(tokenizer):
    encoder = tiny_encoder()
    templates = encoder.prompt
    assert templates.fill_text("dogs bark", "[MASK]") == 'This sentence of "dogs bark." means[MASK].'
    assert templates.fill_text("is it?", "[MASK]") == 'This sentence of "is it?" means[MASK].'  # no period added
    texts = ["dogs bark", "a cat sat on the mat ."]
    tokens = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        filled = encoder(**tokens, pooling="prompt_text")
        wrapped = encoder(**tokens, pooling="prompt_before_pooler")
        ids = tokenizer('This sentence of "dogs bark." means[MASK].', return_tensors="pt")["input_ids"]
        hidden = encoder.backbone(input_ids=ids).last_hidden_state[0]
        at = ids[0].tolist().index(tokenizer.mask_token_id)
        assert torch.allclose(filled[0], hidden[at], atol=1e-5)
    # a sentence that already ends in a period: filling as text and wrapping the tokens give the same input
    assert torch.allclose(filled[1], wrapped[1], atol=1e-5)
    assert not torch.allclose(filled[0], wrapped[0], atol=1e-3)  # the added period changes the first


# -- the empty template of template denoising, as the authors build it -----------------------------------------------
ROBERTA_FIRST = "*cls*_This_sentence_:_'_*sent_0*_'_means*mask*.*sep+*"  # ClusterNS's run_prompt.sh, RoBERTa
ROBERTA_SECOND = "*cls*_The_sentence_:_'_*sent_0*_'_means*mask*.*sep+*"
QUOTED = 'This sentence : "{sentence}" means{mask}.'  # nothing between the quotes once the sentence is out


def authors_denoising(tokenizer, template: str, text: str) -> tuple[list[int], int, list[int]]:
    """ClusterNS's own steps, restated from train_prompt.py and prompt_bert/models.py: bs/es from the template
    (bs stripped, as for RoBERTa; BERT ignores the spaces), the wrapped row ``bs + s + es``, the empty template
    ``tokenizer.encode(bs + es)``, blen = the row's token count - len(template), and the empty template's
    positions shifted by blen after ``len(bs tokens) + 1``. Returns (empty template ids, blen, its positions)."""
    body = (template.replace("*mask*", tokenizer.mask_token).replace("*sep+*", "").replace("*cls*", "")
            .replace("*sent_0*", " "))
    bs, es = (part.replace("_", " ") for part in body.split(" "))
    bs = bs.strip()
    row = tokenizer.encode(bs)[:-1] + tokenizer.encode(text, add_special_tokens=False) + tokenizer.encode(es)[1:]
    empty = tokenizer.encode(bs + es)
    blen = len(row) - len(empty)
    positions = list(range(len(empty)))
    shift_from = len(tokenizer.encode(bs, add_special_tokens=False)) + 1
    positions = positions[:shift_from] + [p + blen for p in positions[shift_from:]]
    return empty, blen, positions


def ours(tokenizer, template: str, text: str) -> tuple[list[int], int, list[int]]:
    templates = PromptTemplates(tokenizer, [template])
    _, lengths = templates.wrap(tokenizer([text], return_tensors="pt"), 0)
    batch = templates.empty_batch(0, lengths)
    return batch["input_ids"][0].tolist(), int(lengths[0]), batch["position_ids"][0].tolist()


@pytest.fixture(scope="module")
def byte_level_bpe():
    """A small byte-level BPE tokenizer in RoBERTa's layout (<s> ... </s>, <mask> taking the space before it),
    trained here on text with many ``""``: no RoBERTa tokenizer is available offline, and this one has the merge
    that makes RoBERTa's empty quoted template shorter than its two halves."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    special = ["<s>", "<pad>", "</s>", "<mask>"]
    corpus = ['he said "" and then " hi " and "" again, this sentence : "" means nothing .'] * 50 + TEXTS * 20
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bpe.post_processor = processors.RobertaProcessing(("</s>", bpe.token_to_id("</s>")),
                                                      ("<s>", bpe.token_to_id("<s>")))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                        mask_token=AddedToken("<mask>", lstrip=True))
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode('x : ""', add_special_tokens=False))[-1] == 'Ġ""'
    return tokenizer


@pytest.mark.parametrize("template", [BERT_FIRST, BERT_SECOND, ROBERTA_FIRST, ROBERTA_SECOND, QUOTED])
def test_wordpiece_empty_template_is_the_prefix_and_suffix_side_by_side(tokenizer, template):
    """BERT's WordPiece (the tiny backbone's and the offline MiniLM's vocabulary): the joined empty template and
    the two halves side by side are the same tokens, and a row's length is its sentence's token count."""
    built = PromptTemplates(tokenizer, [template if "*sent_0*" in template else template]).templates[0]
    assert list(built.joined) == [*built.prefix, *built.suffix]
    for text in TEXTS:
        words = tokenizer(text, add_special_tokens=False)["input_ids"]
        empty, length, positions = ours(tokenizer, template, text)
        assert length == len(words)
        if "*sent_0*" in template:
            assert (empty, length, positions) == authors_denoising(tokenizer, template, text)


def test_byte_level_bpe_empty_template_is_tokenized_as_one_string(byte_level_bpe):
    """With nothing between the quotes, the byte-level BPE merges them into one token: the empty template is one
    token shorter than its halves; the one used is the joined one, and each row's length (which indexes the
    positions of the empty template) is the authors' ``mask.sum - template_len``: one more than the sentence's
    tokens."""
    tok = byte_level_bpe
    built = PromptTemplates(tok, [QUOTED]).templates[0]
    assert tok.convert_ids_to_tokens(list(built.prefix))[-1] == 'Ġ"'
    assert tok.convert_ids_to_tokens(list(built.suffix))[0] == '"'
    assert 'Ġ""' in tok.convert_ids_to_tokens(list(built.joined))
    assert len(built.joined) == len(built.prefix) + len(built.suffix) - 1
    authors_form = QUOTED.replace("{sentence}", "*sent_0*").replace("{mask}", "*mask*").replace(" ", "_")
    for text in TEXTS:
        empty, length, positions = ours(tok, QUOTED, text)
        assert empty == list(built.joined)  # what template denoising runs: the joined form
        assert length == len(tok.encode(text, add_special_tokens=False)) + 1
        assert (empty, length, positions) == authors_denoising(tok, authors_form, text)


@pytest.mark.parametrize("template", [ROBERTA_FIRST, ROBERTA_SECOND])
def test_byte_level_bpe_authors_roberta_templates_agree_both_ways(byte_level_bpe, template):
    """The RoBERTa templates of run_prompt.sh keep a space inside the quotes: nothing merges, the joined form is
    the halves side by side (the authors' own assert), and our steps are theirs."""
    built = PromptTemplates(byte_level_bpe, [template]).templates[0]
    assert list(built.joined) == [*built.prefix, *built.suffix]
    for text in TEXTS:
        assert ours(byte_level_bpe, template, text) == authors_denoising(byte_level_bpe, template, text)
