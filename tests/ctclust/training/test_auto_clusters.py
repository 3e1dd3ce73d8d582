"""ctclust.training.auto_clusters: the scan's settings come from conf/config.yaml, the run's own over them."""
import yaml
from omegaconf import OmegaConf

from ctclust.training.auto_clusters import choose_k_settings
from textcore.checkout import CONF


def test_a_configuration_without_the_section_scans_with_the_defaults_of_conf():
    conf = yaml.safe_load((CONF / "config.yaml").read_text())["choose_k"]
    assert OmegaConf.to_container(choose_k_settings(OmegaConf.create({}))) == conf
    partial = choose_k_settings(OmegaConf.create({"choose_k": {"k": "3:9", "rule": "stability"}}))
    assert (partial.k, partial.rule) == ("3:9", "stability")
    assert partial.max_texts == conf["max_texts"] and partial.kmeans_runs == conf["kmeans_runs"]
