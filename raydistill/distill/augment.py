"""``python -m raydistill.distill.augment``: the augmentation command keeps its documented name; the data stage
builds the set (``raydistill.data.augment``)."""
from raydistill.data.augment import main

if __name__ == "__main__":
    main()
