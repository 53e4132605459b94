"""the model's raw scores beside each memory row, and each repository's cached thresholds

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-08 22:40:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('memory_entries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scores', sa.JSON(), nullable=True))
    with op.batch_alter_table('repositories', schema=None) as batch_op:
        batch_op.add_column(sa.Column('threshold_cache', sa.JSON(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('repositories', schema=None) as batch_op:
        batch_op.drop_column('threshold_cache')
    with op.batch_alter_table('memory_entries', schema=None) as batch_op:
        batch_op.drop_column('scores')
