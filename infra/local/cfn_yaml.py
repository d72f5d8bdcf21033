"""Reading template.yaml with PyYAML: CloudFormation's short-form tags (!Ref, !Sub, !If, ...)
are not YAML that SafeLoader knows. The local provisioner keeps them as opaque markers and the
policy check turns them into their long form, so each says what a tag becomes and this module
holds the loading they share."""

from __future__ import annotations

from typing import Any, Callable

import yaml


def cfn_loader(tagged: Callable[[str, Any], Any]) -> type[yaml.SafeLoader]:
    """A SafeLoader that reads `!Name value` as `tagged("Name", value)`, whatever the value's
    node kind (scalar, sequence or mapping)."""

    class CfnLoader(yaml.SafeLoader):
        pass

    def construct(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return tagged(suffix, value)

    CfnLoader.add_multi_constructor("!", construct)
    return CfnLoader
