"""Which volume a claim gets, and whether a volume a claim names will do.

Pure helpers the `controller` calls, after upstream v1.32:
- `find_best_match`: pkg/controller/volume/persistentvolume/index.go (findByClaim: the
  access-mode sets that contain the claim's, fewest modes first) over
  component-helpers/storage/volume FindMatchingVolume with no node (the controller's path):
  a volume pre-bound to the claim wins at once; otherwise the smallest Available one of
  the claim's class whose labels match its selector, large enough, same volume mode, not
  being deleted. Under WaitForFirstConsumer (and no selected node) only a pre-bound volume
  is taken: the scheduler picks the others.
- `check_volume_satisfies_claim`: pv_controller.go checkVolumeSatisfyClaim, for a claim
  naming its volume; the texts are upstream's.
- `is_volume_bound_to_claim`, `claim_class`, `volume_mode_mismatch`, `default_class`,
  `delay_binding`: the component-helpers of the same names.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from kcm_shared.apimachinery import quantity, selectors

from kcm_controllers.pvbinder import views
from kcm_controllers.pvbinder.views import ClaimView, ClassView, VolumeView

_EPOCH = dt.datetime.min.replace(tzinfo=dt.UTC)


class MatchError(ValueError):
    """The claim's selector cannot be parsed (upstream's "error creating internal label selector")."""


def storage(resources: Mapping[str, object] | None) -> quantity.Quantity:
    """The `storage` quantity of a capacity or requests map; missing or unparsable is zero,
    as Go's zero Quantity from a map miss."""
    value = (resources or {}).get("storage")
    if value is None:
        return quantity.ZERO
    try:
        return quantity.parse(value)
    except quantity.QuantityError:
        return quantity.ZERO


def claim_class(claim: ClaimView) -> str:
    """upstream GetPersistentVolumeClaimClass: the beta annotation wins over the field."""
    ann = claim.metadata.annotations.get(views.ANN_BETA_STORAGE_CLASS)
    if ann is not None:
        return ann
    return claim.spec.storage_class_name or ""


def claim_has_class(claim: ClaimView) -> bool:
    """upstream PersistentVolumeClaimHasClass: the user said something, even ""."""
    return (
        views.ANN_BETA_STORAGE_CLASS in claim.metadata.annotations
        or claim.spec.storage_class_name is not None
    )


def volume_class(volume: VolumeView) -> str:
    """upstream GetPersistentVolumeClass."""
    ann = volume.metadata.annotations.get(views.ANN_BETA_STORAGE_CLASS)
    return ann if ann is not None else volume.spec.storage_class_name


def volume_mode_mismatch(claim: ClaimView, volume: VolumeView) -> bool:
    """upstream CheckVolumeModeMismatches: an unset mode is Filesystem on both sides."""
    return (claim.spec.volume_mode or views.FILESYSTEM) != (volume.spec.volume_mode or views.FILESYSTEM)


def access_modes_fit(claim: ClaimView, volume: VolumeView) -> bool:
    """upstream CheckAccessModes: every mode the claim asks for, the volume has."""
    return set(claim.spec.access_modes) <= set(volume.spec.access_modes)


def is_volume_bound_to_claim(volume: VolumeView, claim: ClaimView) -> bool:
    """upstream IsVolumeBoundToClaim: claimRef names the claim, with its uid or none."""
    ref = volume.spec.claim_ref
    if ref is None or ref.name != claim.metadata.name or ref.namespace != claim.metadata.namespace:
        return False
    return ref.uid in ("", claim.metadata.uid)


def check_volume_satisfies_claim(volume: VolumeView, claim: ClaimView) -> str | None:
    """Why `volume` cannot serve `claim`, in upstream's words, or None when it can."""
    if volume.metadata.deletion_timestamp is not None:
        return f'the volume is marked for deletion "{volume.metadata.name}"'
    if storage(volume.spec.capacity) < storage(claim.spec.resources.requests):
        return "requested PV is too small"
    if volume_class(volume) != claim_class(claim):
        return "storageClassName does not match"
    if volume_mode_mismatch(claim, volume):
        return "incompatible volumeMode"
    if not access_modes_fit(claim, volume):
        return "incompatible accessMode"
    return None


def _mode_sets(claim: ClaimView, volumes: Iterable[VolumeView]) -> list[list[VolumeView]]:
    """The volumes grouped by access-mode set, only the sets holding all of the claim's modes,
    fewest modes first (upstream's allPossibleMatchingAccessModes order)."""
    wanted = frozenset(claim.spec.access_modes)
    groups: dict[frozenset[str], list[VolumeView]] = {}
    for volume in volumes:
        modes = frozenset(volume.spec.access_modes)
        if wanted <= modes:
            groups.setdefault(modes, []).append(volume)
    return [groups[modes] for modes in sorted(groups, key=len)]


def _claim_selector(claim: ClaimView) -> selectors.LabelSelector | None:
    if claim.spec.selector is None:
        return None
    try:
        return selectors.label_selector_from_dict(claim.spec.selector)
    except selectors.SelectorError as exc:
        key = f"{claim.metadata.namespace}/{claim.metadata.name}"
        raise MatchError(f"error creating internal label selector for claim: {key}: {exc}") from exc


def find_best_match(
    claim: ClaimView, volumes: Iterable[VolumeView], *, delay_binding: bool
) -> VolumeView | None:
    """The volume the controller binds `claim` to, or None (see the module docstring)."""
    selector = _claim_selector(claim)
    requested = storage(claim.spec.resources.requests)
    wanted_class = claim_class(claim)
    for group in _mode_sets(claim, volumes):
        best: VolumeView | None = None
        best_size = quantity.ZERO
        for volume in group:
            if volume.spec.claim_ref is not None and not is_volume_bound_to_claim(volume, claim):
                continue
            size = storage(volume.spec.capacity)
            if size < requested or volume_mode_mismatch(claim, volume):
                continue
            if volume.metadata.deletion_timestamp is not None:
                continue
            if is_volume_bound_to_claim(volume, claim):
                return volume
            if delay_binding or volume.status.phase != views.AVAILABLE:
                continue
            if selector is not None and not selector.matches(volume.metadata.labels):
                continue
            if volume_class(volume) != wanted_class:
                continue
            if best is None or size < best_size:
                best, best_size = volume, size
        if best is not None:
            return best
    return None


def default_class(classes: Iterable[ClassView]) -> ClassView | None:
    """upstream GetDefaultClass: of the classes marked default, the newest (then by name)."""
    marked = [
        c
        for c in classes
        if c.metadata.annotations.get(views.ANN_DEFAULT_CLASS) == "true"
        or c.metadata.annotations.get(views.ANN_BETA_DEFAULT_CLASS) == "true"
    ]
    if not marked:
        return None
    marked.sort(key=lambda c: c.metadata.name)
    marked.sort(key=lambda c: c.metadata.creation_timestamp or _EPOCH, reverse=True)
    return marked[0]


class BindingModeError(ValueError):
    """A class without volumeBindingMode (upstream's IsDelayBindingMode error)."""


def delay_binding(claim: ClaimView, classes: Mapping[str, ClassView]) -> bool:
    """upstream IsDelayBindingMode: the claim's class binds on WaitForFirstConsumer. A class
    not (yet) known binds at once."""
    name = claim_class(claim)
    if not name or name not in classes:
        return False
    mode = classes[name].volume_binding_mode
    if mode is None:
        raise BindingModeError(f'VolumeBindingMode not set for StorageClass "{name}"')
    return mode == views.WAIT_FOR_FIRST_CONSUMER


def delay_binding_provisioning(claim: ClaimView) -> bool:
    """upstream IsDelayBindingProvisioning: the scheduler chose a node for the claim."""
    return views.ANN_SELECTED_NODE in claim.metadata.annotations
