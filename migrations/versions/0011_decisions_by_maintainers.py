"""label_events.by_maintainer (only a maintainer's event teaches) and predictions.abstain_mark (taken off when a
maintainer decides)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 10:00:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0011'
down_revision: Union[str, Sequence[str], None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('label_events') as batch:
        batch.add_column(sa.Column('by_maintainer', sa.Boolean(), nullable=True))
    with op.batch_alter_table('predictions') as batch:
        batch.add_column(sa.Column('abstain_mark', sa.String(length=255), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('predictions') as batch:
        batch.drop_column('abstain_mark')
    with op.batch_alter_table('label_events') as batch:
        batch.drop_column('by_maintainer')
