"""``torchrl.modules``: networks, distributions, and TensorDict modules (actors, critics, exploration)."""
from torchrl.modules.distributions import *  # noqa: F401,F403
from torchrl.modules.distributions import __all__ as _distribution_names
from torchrl.modules.models import *  # noqa: F401,F403
from torchrl.modules.models import __all__ as _model_names
from torchrl.modules.tensordict_module import *  # noqa: F401,F403
from torchrl.modules.tensordict_module import __all__ as _td_module_names

__all__ = [*_distribution_names, *_model_names, *[n for n in _td_module_names if n != "apply_policy_env_transforms"]]
